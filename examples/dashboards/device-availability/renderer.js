// Device availability: a netmon dashboard package (interface dashboard-browser-module-v1).
// A plain ES module with no imports and no build step. The host hands it decoded frames:
// the "availability" frame is an Arrow IPC frame, read here through its Arrow table.

const SVG = "http://www.w3.org/2000/svg";

function el(name, attrs, text) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

/** Count available and unavailable devices from the frame's Arrow column `is_available`. */
function counts(frame) {
  let available = 0;
  let unavailable = 0;
  const column = frame?.table?.getChild("is_available");
  if (column) {
    for (let i = 0; i < column.length; i++) {
      if (column.get(i) === true) available++;
      else unavailable++;
    }
  }
  return { available, unavailable };
}

export function mountDashboard(root, host, api) {
  const dark = host.theme === "dark";
  const wrap = document.createElement("section");
  wrap.className = "device-availability";
  const title = document.createElement("h2");
  title.textContent = "Device availability";
  const status = document.createElement("p");
  status.dataset.role = "status";
  const chart = document.createElement("div");
  chart.dataset.role = "chart";
  const hosts = document.createElement("p");
  hosts.dataset.role = "hosts";
  const next = document.createElement("button");
  next.type = "button";
  next.textContent = "Next page";
  const first = document.createElement("button");
  first.type = "button";
  first.textContent = "First page";
  wrap.append(title, status, chart, hosts, first, next);
  root.append(wrap);

  function draw() {
    const frame = api.frame("availability");
    if (!frame) return;
    if (frame.status === "error") {
      status.textContent = `Could not load devices: ${frame.error}`;
      return;
    }
    const { available, unavailable } = counts(frame);
    status.textContent = `${frame.row_count} devices on this page: ${available} available, ${unavailable} unavailable`;
    const max = Math.max(1, available, unavailable);
    const svg = el("svg", {
      viewBox: "0 0 320 140",
      width: 320,
      height: 140,
      role: "img",
      "aria-label": status.textContent,
    });
    const bars = [
      ["available", available, "#2e9e5b"],
      ["unavailable", unavailable, "#d64545"],
    ];
    bars.forEach(([label, value, color], i) => {
      const h = Math.round((value / max) * 100);
      const x = 40 + i * 140;
      svg.append(
        el("rect", {
          x,
          y: 110 - h,
          width: 100,
          height: h,
          fill: color,
          "data-series": label,
          "data-value": value,
        }),
        el(
          "text",
          { x: x + 50, y: 128, "text-anchor": "middle", fill: dark ? "#ddd" : "#222", "font-size": 12 },
          `${label}: ${value}`,
        ),
      );
    });
    chart.replaceChildren(svg);
    const names = frame.rows.map((r) => r.hostname).filter(Boolean);
    hosts.textContent = names.length ? `Hosts: ${names.join(", ")}` : "";
    next.disabled = !frame.pagination.next_cursor;
  }

  const onNext = () => {
    const cursor = api.frame("availability")?.pagination.next_cursor;
    if (cursor) api.srql.page("availability", cursor).catch((err) => (status.textContent = String(err)));
  };
  // frames:refresh makes the host forget stored cursors and read every frame from the start.
  const onFirst = () => root.dispatchEvent(new CustomEvent("frames:refresh"));
  next.addEventListener("click", onNext);
  first.addEventListener("click", onFirst);
  const unsubscribe = api.subscribe(draw);
  draw();

  return {
    destroy() {
      unsubscribe();
      next.removeEventListener("click", onNext);
      first.removeEventListener("click", onFirst);
      wrap.remove();
    },
  };
}
