import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { LocationProvider, Route, Router } from "preact-iso";
import { ApiError, api, type Me } from "./api.ts";
import { Layout } from "./components/Layout.tsx";
import { AlertDetail, Alerts } from "./pages/Alerts.tsx";
import { CheckDetail, CheckEdit, Checks } from "./pages/Checks.tsx";
import { Dashboards, DashboardView } from "./pages/Dashboards.tsx";
import { DeviceDetail, Devices } from "./pages/Devices.tsx";
import { Fleet } from "./pages/Fleet.tsx";
import { Logs } from "./pages/Logs.tsx";
import { Metrics } from "./pages/Metrics.tsx";
import { NotFound } from "./pages/NotFound.tsx";
import { Overview } from "./pages/Overview.tsx";
import { Profiles } from "./pages/Profiles.tsx";
import { QueryExplorer } from "./pages/Query.tsx";
import { Rules } from "./pages/Rules.tsx";
import { ApiCredentials, Settings, Users } from "./pages/Settings.tsx";
import { TraceDetail, Traces } from "./pages/Traces.tsx";
import { SessionContext } from "./session.ts";
import { applyTheme, storedTheme } from "./theme.ts";
import "./styles.css";
import { Authentication } from "./pages/Authentication.tsx";

applyTheme(storedTheme());

function App() {
  const [me, setMe] = useState<Me | null>(null);
  const [error, setError] = useState<string>();
  useEffect(() => {
    api
      .get<Me>("/api/v1/me")
      .then(setMe)
      .catch((e) => setError(e instanceof ApiError ? e.problem.message : String(e)));
  }, []);
  if (error) return <p class="error">{error}</p>;
  if (!me) return <p class="muted boot">Loading…</p>;
  return (
    <SessionContext.Provider value={me}>
      <LocationProvider>
        <Layout>
          <Router>
            <Route path="/" component={Overview} />
            <Route path="/devices" component={Devices} />
            <Route path="/devices/:uid" component={DeviceDetail} />
            <Route path="/checks" component={Checks} />
            <Route path="/checks/new" component={CheckEdit} />
            <Route path="/checks/profiles" component={Profiles} />
            <Route path="/checks/:id/edit" component={CheckEdit} />
            <Route path="/checks/:id" component={CheckDetail} />
            <Route path="/alerts" component={Alerts} />
            <Route path="/alerts/:id" component={AlertDetail} />
            <Route path="/logs" component={Logs} />
            <Route path="/traces" component={Traces} />
            <Route path="/traces/:id" component={TraceDetail} />
            <Route path="/otel-metrics" component={Metrics} />
            <Route path="/query" component={QueryExplorer} />
            <Route path="/fleet" component={Fleet} />
            <Route path="/rules" component={Rules} />
            <Route path="/dashboards" component={Dashboards} />
            <Route path="/dashboards/:slug" component={DashboardView} />
            <Route path="/settings" component={Settings} />
            <Route path="/settings/api-credentials" component={ApiCredentials} />
            <Route path="/settings/users" component={Users} />
            <Route path="/settings/authentication" component={Authentication} />
            <Route default component={NotFound} />
          </Router>
        </Layout>
      </LocationProvider>
    </SessionContext.Provider>
  );
}

const root = document.getElementById("app");
if (root) render(<App />, root);
