import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

/** A throw-away RSA key and self-signed certificate (PEM) made by openssl, for TLS and SAML tests. */
export function selfSignedCert(cn: string, opts: { ipSan?: string } = {}): { key: string; cert: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "netmon-cert-"));
  try {
    const key = path.join(dir, "key.pem");
    const cert = path.join(dir, "cert.pem");
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        key,
        "-out",
        cert,
        "-days",
        "2",
        "-subj",
        `/CN=${cn}`,
        ...(opts.ipSan ? ["-addext", `subjectAltName=IP:${opts.ipSan}`] : []),
      ],
      { stdio: "ignore" },
    );
    return { key: fs.readFileSync(key, "utf8"), cert: fs.readFileSync(cert, "utf8") };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
