import { render } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { api, authState, projectKey, signOut, type AuthState, type ModelInfo, type Project } from "./api";
import { loadListOptions, saveListOptions, SessionList, type ListOptions, type Shelf } from "./components/SessionList";
import { Agents } from "./pages/Agents";
import { Chat } from "./pages/Chat";
import { NewSession } from "./pages/NewSession";
import { Setup } from "./pages/Setup";
import { SignIn } from "./pages/SignIn";
import { Team } from "./pages/Team";
import { Trace } from "./pages/Trace";
import { Usage } from "./pages/Usage";
import { navigate, onLink, usePath } from "./router";
import { useSessionList } from "./sessions";
import "./styles.css";

type Theme = "light" | "dark" | "system";

function useTheme(): [Theme, (t: Theme) => void] {
  const [theme, setTheme] = useState<Theme>((localStorage.getItem("penguin.theme") as Theme) || "system");
  useEffect(() => {
    document.documentElement.dataset.theme = theme;
    localStorage.setItem("penguin.theme", theme);
  }, [theme]);
  return [theme, setTheme];
}

interface Models {
  list: ModelInfo[];
  /** Why there are none, when there are none (the llm service's words). */
  notice?: string;
  loaded: boolean;
  reload: () => void;
}

/** useModels lists the models, and why there are none when there are none. */
function useModels(enabled: boolean): Models {
  const [state, setState] = useState<{ list: ModelInfo[]; notice?: string; loaded: boolean }>({ list: [], loaded: false });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    if (!enabled) return;
    api.models().then((r) => {
      const list = r.models ?? [];
      setState({ list, loaded: true, notice: r.notice || (list.length ? undefined : "No model is configured.") });
    }).catch((e) => setState({ list: [], loaded: true, notice: e.message }));
  }, [enabled, tick]);
  return { ...state, reload: () => setTick((t) => t + 1) };
}

/** useProjects lists the caller's projects and keeps the one the
 * switcher chose (empty: every project's sessions). */
function useProjects(enabled: boolean): { list: Project[]; current: string; choose: (p: string) => void; reload: () => void } {
  const [list, setList] = useState<Project[]>([]);
  const [current, setCurrent] = useState(localStorage.getItem(projectKey) ?? "");
  const [tick, setTick] = useState(0);
  useEffect(() => {
    if (!enabled) return;
    api.projects().then((r) => setList(r.projects ?? [])).catch(() => setList([]));
  }, [enabled, tick]);
  const choose = (p: string) => {
    localStorage.setItem(projectKey, p);
    setCurrent(p);
  };
  // A project the caller no longer belongs to is not kept.
  const known = !current || list.some((p) => p.project_id === current);
  return { list, current: known ? current : "", choose, reload: () => setTick((t) => t + 1) };
}

function App() {
  const [auth, setAuth] = useState<"checking" | "signin" | "ok">("checking");
  const [who, setWho] = useState<AuthState>({ auth_required: false, signed_in: false });
  const [bootError, setBootError] = useState("");
  const check = () => authState().then((s) => { setWho(s); setAuth(s.signed_in ? "ok" : "signin"); }).catch((e) => setBootError(e.message));
  useEffect(() => { void check(); }, []);
  const path = usePath();
  const list = useSessionList(auth === "ok");
  const models = useModels(auth === "ok");
  const projects = useProjects(auth === "ok");
  const rows = projects.current ? list.rows.filter((r) => (r.session.project_id || "default") === projects.current) : list.rows;
  const [theme, setTheme] = useTheme();
  const [query, setQuery] = useState("");
  const [menu, setMenu] = useState(false);
  const [shelf, setShelf] = useState<Shelf>("active");
  // The grouping and the Scheduled folder's state are remembered in the
  // browser per project: projects differ in how
  // many agents and schedules they have.
  const [options, setOptionsState] = useState<ListOptions>(() => loadListOptions(projects.current));
  useEffect(() => setOptionsState(loadListOptions(projects.current)), [projects.current]);
  const setOptions = (o: Partial<ListOptions>) => {
    const next = { ...options, ...o };
    saveListOptions(projects.current, next);
    setOptionsState(next);
  };
  const grouping = options.grouping;
  const search = useRef<HTMLInputElement>(null);
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      const typing = (e.target as HTMLElement)?.closest?.("input, textarea, select");
      if (e.key === "/" && !typing) {
        e.preventDefault();
        search.current?.focus();
      } else if (e.key === "n" && e.altKey) {
        e.preventDefault();
        navigate("/new");
      }
    };
    addEventListener("keydown", onKey);
    return () => removeEventListener("keydown", onKey);
  }, []);
  useEffect(() => setMenu(false), [path]);
  // The first run lands on the form that adds a model: with none, the
  // front page could only fail.
  const firstRun = models.loaded && !models.list.length;
  useEffect(() => {
    if (firstRun && path === "/") navigate("/setup", true);
  }, [firstRun, path]);

  if (bootError) return <main class="signin"><p class="banner error">The server does not answer: {bootError}</p></main>;
  if (auth === "checking") return null;
  if (auth === "signin") return <SignIn team={who.mode === "team"} oidcName={who.oidc_name} onSignedIn={() => void check()} />;

  const m = path.match(/^\/sessions\/([^/]+)(\/trace)?$/);
  const current = m ? decodeURIComponent(m[1]) : "";
  const row = list.rows.find((r) => r.session.session_id === current);
  let page;
  if (m && m[2]) page = <Trace id={current} />;
  else if (m) page = <Chat key={current} id={current} session={row?.session} lastStatus={row?.last_status} onChanged={list.changed} />;
  else if (path === "/usage") page = <Usage />;
  else if (path === "/agents" || path.startsWith("/agents/")) page = <Agents key={projects.current} name={decodeURIComponent(path.slice("/agents/".length))} />;
  else if (path === "/team") page = <Team auth={who} onProjectsChanged={projects.reload} onAuthChanged={() => void check()} />;
  else if (path === "/setup") page = <Setup notice={models.notice} models={models.list} onDone={models.reload}
    project={projects.current} projects={projects.list} admin={who.mode !== "team" || !!who.user?.admin || !!who.operator} />;
  else if (firstRun && path === "/") page = null;
  else page = <NewSession models={models.list} project={projects.current} />;

  return (
    <div class={`layout ${menu ? "menu-open" : ""}`}>
      <aside class="sidebar" aria-label="Sessions">
        <div class="brand row">
          <strong>Penguin</strong>
          <button class="icon" aria-label="Theme" title="Light, dark or the system's" onClick={() => setTheme(theme === "system" ? "light" : theme === "light" ? "dark" : "system")}>{theme === "system" ? "◐" : theme === "light" ? "☀" : "☾"}</button>
        </div>
        <a class="button primary" href="/new" onClick={onLink} title="Alt+N">New session</a>
        <input ref={search} type="search" placeholder="Search sessions  /" aria-label="Search sessions" value={query} onInput={(e) => setQuery(e.currentTarget.value)} />
        <div class="shelves" role="group" aria-label="Which sessions">
          <button aria-pressed={shelf === "active"} onClick={() => setShelf("active")}>Active</button>
          <button aria-pressed={shelf === "archived"} onClick={() => setShelf("archived")}>Archived</button>
          <button aria-pressed={grouping === "agent"} title="Group the sessions under their agents" onClick={() => setOptions({ grouping: grouping === "agent" ? "none" : "agent" })}>By agent</button>
        </div>
        {projects.list.length > 0 && (
          <label class="project-switcher">Project <select aria-label="Project" value={projects.current} onChange={(e) => projects.choose(e.currentTarget.value)}>
            <option value="">All projects</option>
            {projects.list.map((p) => <option key={p.project_id} value={p.project_id}>{p.name || p.project_id}</option>)}
          </select></label>
        )}
        <SessionList rows={rows} loaded={list.loaded} current={current} query={query} shelf={shelf} grouping={grouping}
          scheduledOpen={options.scheduledOpen} toggleScheduled={() => setOptions({ scheduledOpen: !options.scheduledOpen })} more={list.more} changed={list.changed} />
        <nav class="side-nav">
          <a href="/usage" onClick={onLink}>Usage</a>
          <a href="/agents" onClick={onLink}>Agents</a>
          <a href="/setup" onClick={onLink}>Models</a>
          {who.mode === "team" && <a href="/team" onClick={onLink}>Team</a>}
          {!list.connected && list.loaded && <span class="muted small">offline</span>}
          <button class="link" onClick={async () => { await signOut().catch(() => undefined); void check(); }}>Sign out</button>
        </nav>
      </aside>
      {menu && <div class="backdrop" onClick={() => setMenu(false)} aria-hidden="true" />}
      <main class="main">
        <button class="icon menu-button" aria-label="Sessions" onClick={() => setMenu(!menu)}>☰</button>
        {models.notice && !models.list.length && !m && path !== "/setup" && (
          <div class="banner warn top-banner" role="status" data-testid="no-model">No model is configured yet. <a href="/setup" onClick={onLink}>Add a model</a></div>
        )}
        {page}
      </main>
    </div>
  );
}

render(<App />, document.getElementById("app")!);
