/** URL of the same server with another database name. */
export function databaseUrl(base: string, database: string): string {
  const u = new URL(base);
  u.pathname = `/${database}`;
  return u.toString();
}

/** Connect to the base URL's own database to run CREATE/DROP DATABASE. */
export function adminUrl(base: string): string {
  return base;
}
