/**
 * Host page for dashboard packages. The browser-module runtime of signed dashboard packages mounts
 * here once it exists; until then the page says so instead of pretending.
 */
export function Dashboards() {
  return (
    <>
      <h1>Dashboards</h1>
      <p>
        No dashboard packages are installed. Signed dashboard packages (publish, enable, and their browser
        runtime) are not built yet; until they are, the <a href="/">overview</a> and the{" "}
        <a href="/query">query explorer</a> chart any SRQL query.
      </p>
      <div id="dashboard-host" />
    </>
  );
}
