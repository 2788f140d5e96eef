export function NotFound() {
  return (
    <>
      <h1>Page not found</h1>
      <p>
        There is no console page at <code>{location.pathname}</code>. <a href="/">Back to the overview</a>.
      </p>
    </>
  );
}
