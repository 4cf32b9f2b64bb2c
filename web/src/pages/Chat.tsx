import type { ComponentChildren } from "preact";
import { useEffect, useLayoutEffect, useMemo, useReducer, useRef, useState } from "preact/hooks";
import { elementScroll, observeElementOffset, observeElementRect, Virtualizer } from "@tanstack/virtual-core";
import { api, ApiError, type ProcessInfo, type Session } from "../api";
import { read, size, withFiles, type Attachment, type AttachmentLimits } from "../attach";
import { goalCommand, parseBudget } from "../goal";
import { agents, type SkillInfo } from "../agents";
import { parseSkillsBlock } from "../skills";
import { stateWord, tokens, usageData, usageLine } from "../format";
import { highlight, onCodeCopy, renderMarkdown } from "../markdown";
import { fileChange } from "../omni/diff";
import { apply, mainItems, newConversation, thread, type Conversation, type Item, type PendingApproval, type ToolItem } from "../omni/reducer";
import { parseSSE } from "../omni/types";
import { navigate } from "../router";
import { RenameBox } from "../components/SessionList";
import { Workspace } from "../components/Workspace";

type Link = "connecting" | "live" | "reconnecting" | "gone";

/** useConversation follows a session's stream into a Conversation. The
 * stream replays the whole log first, then the live run; on a reconnect
 * the browser sends Last-Event-ID and the gateway resumes after it, and
 * the reducer drops anything it already applied. */
function useConversation(id: string): [Conversation, Link, string] {
  const conv = useRef(newConversation());
  const [, setVersion] = useState(0);
  const [link, setLink] = useState<Link>("connecting");
  const [problem, setProblem] = useState("");
  useEffect(() => {
    conv.current = newConversation();
    setVersion(-1);
    setProblem("");
    let es: EventSource | undefined;
    let closed = false;
    let frame = 0;
    let timer = 0;
    const render = () => {
      if (!frame) frame = requestAnimationFrame(() => {
        frame = 0;
        setVersion(conv.current.version);
      });
    };
    const open = (after: number) => {
      es = new EventSource(`/api/sessions/${encodeURIComponent(id)}/stream?after=${after}`);
      const on = (name: string) => (e: Event) => {
        const m = e as MessageEvent;
        const ev = parseSSE(name, m.lastEventId, m.data);
        if (ev && apply(conv.current, ev)) render();
      };
      es.addEventListener("message", on("message"));
      es.addEventListener("server_event", on("server_event"));
      es.addEventListener("error", (e) => {
        if (e instanceof MessageEvent && e.data) {
          // The gateway ended the stream with an error (this reader fell
          // behind the live run, say): resume after the last event seen.
          es?.close();
          setLink("reconnecting");
          timer = window.setTimeout(() => !closed && open(conv.current.lastSeq), 300);
          return;
        }
        if (es?.readyState === EventSource.CLOSED) {
          setLink("gone");
          api.getSession(id).catch((err: ApiError) => setProblem(err.message));
        } else setLink("reconnecting");
      });
      es.onopen = () => setLink("live");
    };
    open(0);
    return () => {
      closed = true;
      es?.close();
      cancelAnimationFrame(frame);
      clearTimeout(timer);
    };
  }, [id]);
  return [conv.current, link, problem];
}

export function Chat({ id, session: listed, lastStatus, onChanged }: { id: string; session?: Session; lastStatus?: string; onChanged?: (s: Session) => void }) {
  const [conv, link, problem] = useConversation(id);
  // The sidebar's list holds the newest sessions; an older one is read
  // once.
  const [fetched, setFetched] = useState<Session>();
  useEffect(() => {
    if (!listed) api.getSession(id).then(setFetched).catch(() => undefined);
  }, [id, !listed]);
  const session = listed ?? fetched;
  // The enabled skills of the session's agent, which the composer can pin
  // to a message; none when they cannot be read (the composer then has no
  // Skills control).
  const [agentSkills, setAgentSkills] = useState<SkillInfo[]>([]);
  const agentName = session ? session.agent || "default" : "";
  const projectID = session?.project_id || "default";
  useEffect(() => {
    setAgentSkills([]);
    if (!agentName) return;
    agents.skillsOf(projectID, agentName).then((r) => setAgentSkills((r?.skills ?? []).filter((sk) => sk.enabled))).catch(() => undefined);
  }, [projectID, agentName]);
  const [renaming, setRenaming] = useState(false);
  const [showProcs, setShowProcs] = useState(false);
  const [showWorkspace, setShowWorkspace] = useState(false);
  const update = (body: Parameters<typeof api.updateSession>[1]) => act(async () => {
    const s = await api.updateSession(id, body);
    setFetched(s);
    onChanged?.(s);
  });
  // Follow-ups wait in the browser (per session, across reloads) until the
  // task ends, and are sent one per task; until then each can be recalled.
  const [followUps, setFollowUps] = useFollowUps(id);
  const [error, setError] = useState("");
  const running = conv.state !== "idle";
  // Steering sent but not yet in the conversation: it reaches the model
  // at its next request, and shows as queued until then.
  const [queued, setQueued] = useState<string[]>([]);
  useEffect(() => {
    if (!running) setQueued([]);
  }, [running]);
  const [sendMode, setSendMode] = useState<"steer" | "queue">(() => (localStorage.getItem("penguin.sendMode") as "queue") ?? "steer");
  useEffect(() => localStorage.setItem("penguin.sendMode", sendMode), [sendMode]);
  const [recalled, setRecalled] = useState<string>();
  useEffect(() => {
    // The next follow-up goes once the session is idle and the stream is
    // live (a replaying page must not send it before it knows).
    if (running || link !== "live" || !followUps.length || conv.state !== "idle") return;
    const [next, ...rest] = followUps;
    setFollowUps(rest);
    void act(() => api.startTask(id, next));
  }, [running, link, followUps.length, conv.state]);
  const act = async (f: () => Promise<unknown>) => {
    setError("");
    try {
      await f();
    } catch (e) {
      setError((e as Error).message);
    }
  };
  const items = mainItems(conv);
  const usage = conv.sessionUsage ?? session?.usage;
  // How the last task ended comes with its idle state on the stream; a
  // page opened later learns it from the session list.
  const word = conv.pending.size ? "awaiting approval" : stateWord(conv.state, conv.status ?? (conv.state === "idle" ? lastStatus : undefined));
  return (
    <section class="chat" aria-label="Conversation">
      <header class="chat-head">
        <div class="chat-title">
          <h1>{renaming
            ? <RenameBox title={session?.title || ""} onDone={(t) => { setRenaming(false); if (t !== undefined) void update({ title: t }); }} />
            : <button class="title-text link" title="Rename" data-testid="chat-title" onClick={() => setRenaming(true)}>{session?.title || "New conversation"}</button>}
            {session?.pinned && <span class="badge" data-testid="pinned">pinned</span>}
            {session?.archived && <span class="badge" data-testid="archived">archived</span>}
            <span class={`badge state-${word.replace(" ", "-")}`} data-testid="chat-state">{word}</span></h1>
          <div class="muted small meta">{session?.model?.provider}/{session?.model?.model_id} · {session?.workspace ?? conv.workspace}</div>
          {usage && <div class="muted small" title="Tokens and cost of the whole session" data-testid="session-usage" {...usageData(usage)}>Session: {usageLine(usage)}</div>}
        </div>
        <nav class="chat-actions">
          <button aria-expanded={showWorkspace} aria-controls="workspace" onClick={() => setShowWorkspace(!showWorkspace)}>Workspace</button>
          <button aria-expanded={showProcs} aria-controls="processes" onClick={() => setShowProcs(!showProcs)}>Processes</button>
          <a class="button" href={`/sessions/${encodeURIComponent(id)}/trace`} onClick={(e) => { e.preventDefault(); navigate(`/sessions/${encodeURIComponent(id)}/trace`); }}>Trace</a>
          <button disabled={running} title={running ? "Wait until the task ends" : "Copy this conversation into a new session"}
            onClick={() => act(async () => navigate(`/sessions/${encodeURIComponent((await api.forkSession(id)).session_id)}`))}>Fork</button>
          <button disabled={running} onClick={() => act(() => api.compact(id))}>Compact</button>
          <button onClick={() => update({ pinned: !session?.pinned })} disabled={!session || session.archived}>{session?.pinned ? "Unpin" : "Pin"}</button>
          <button onClick={() => update({ archived: !session?.archived, ...(session?.archived ? {} : { pinned: false }) })} disabled={!session}>{session?.archived ? "Unarchive" : "Archive"}</button>
          <button class="danger" onClick={() => confirm("Delete this session and its log?") && act(async () => { await api.deleteSession(id); navigate("/"); })}>Delete</button>
        </nav>
      </header>
      {showWorkspace && <Workspace id={id} running={running} version={conv.workspaceChanges ?? 0} />}
      {showProcs && <Processes id={id} running={running} />}
      {link !== "live" && link !== "connecting" && <div class="banner warn" role="status">{problem || (link === "gone" ? "The stream closed." : "Reconnecting…")}</div>}
      <Messages key={id} conv={conv} items={items} sessionId={id} busy={running} tail={[
        ...(conv.status && conv.state === "idle" && conv.status !== "completed" && conv.status !== "aborted" ? [{
          key: "status",
          node: <div class="banner error" role="status">Task {conv.status}{conv.statusMessage ? `: ${conv.statusMessage}` : ""}</div>,
        }] : []),
        ...steering(conv, queued, running).map((t, i) => ({
          key: `queued-${i}`,
          node: <div class="msg user from-steering queued" data-testid="queued-steer"><span class="muted small">Steering · queued for the next model request</span><p class="pre">{t}</p></div>,
        })),
      ]} />
      {[...conv.pending.values()].map((p) => <ApprovalCard key={p.thread + p.toolCallId} p={p} onAnswer={(allow) => act(() => api.approve(id, p.toolCallId, allow, p.origin))} />)}
      {conv.retry && <RetryCountdown at={conv.retry.at} waiting={conv.state === "retry_wait"} onRetry={() => act(async () => {
        // The engine cuts short only a wait it is in; a wait that ended
        // by itself meanwhile leaves nothing to cut.
        if (!(await api.retryNow(id))?.retried) throw new Error("The session was not waiting to reconnect any more.");
      })} />}
      {error && <div class="banner error" role="alert">{error}</div>}
      {followUps.map((t, i) => (
        <div class="queued-follow-up row" data-testid="queued-follow-up">
          <span class="muted small">Queued for when the task ends:</span> <span class="pre">{t}</span>
          <button class="link small" onClick={() => { setFollowUps(followUps.filter((_, j) => j !== i)); setRecalled(t); }} title="Take it back into the message box">↩ Recall</button>
        </div>
      ))}
      <SessionControls session={session} running={running} compacting={conv.state === "compacting"} empty={!items.length} onUpdate={update}
        onCompactThenSwitch={(level) => act(async () => {
          // The level applies however the compaction ends, with a word
          // when it did not finish.
          let note = "";
          try {
            const r = await api.compact(id);
            if (r?.status && r.status !== "STOP_REASON_COMPLETED") note = r.message || r.status;
          } catch (e) {
            note = (e as Error).message;
          }
          const s = await api.updateSession(id, { thinking_level: level });
          setFetched(s);
          onChanged?.(s);
          if (note) throw new Error(`The compaction did not finish (${note}); the thinking level changed anyway.`);
        })} sendMode={sendMode} onSendMode={setSendMode} />
      <Composer running={running} mode={sendMode} recalled={recalled} skills={agentSkills} onSend={(text, goal, att, skills) => act(async () => {
        if (!running) return api.startTask(id, withFiles(text, att), undefined, goal, att.filter((a) => a.kind === "image").map((a) => a.content), skills);
        if (sendMode === "queue") {
          setFollowUps([...followUps, withFiles(text, att)]);
          return;
        }
        const images = att.filter((a) => a.kind === "image").map((a) => a.content);
        const steer = withFiles(text, att);
        await api.steer(id, steer, images);
        setQueued((q) => [...q, steer]);
      })} onAbort={() => act(() => api.abort(id))} />
    </section>
  );
}

/** Processes lists the commands of the session's environment, read again
 * every two seconds while it is open, with a Kill button for each that
 * runs. */
function Processes({ id, running }: { id: string; running: boolean }) {
  const [list, setList] = useState<ProcessInfo[]>();
  const [note, setNote] = useState("");
  const [error, setError] = useState("");
  const load = () => api.processes(id).then((r) => { setList(r.processes ?? []); setError(""); }).catch((e: Error) => setError(e.message));
  useEffect(() => {
    void load();
    const t = setInterval(load, 2000);
    return () => clearInterval(t);
  }, [id, running]);
  return (
    <section id="processes" class="processes" aria-label="Processes" data-testid="processes">
      <h2 class="small">Commands of this session</h2>
      {error && <div class="banner error" role="alert">{error}</div>}
      {note && <div class="muted small" role="status" data-testid="kill-note">{note}</div>}
      {list && !list.length && <p class="muted small">No command runs in this session's environment.</p>}
      {!!list?.length && (
        <table class="small">
          <thead><tr><th scope="col">Command</th><th scope="col">State</th><th scope="col">Started</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
          <tbody>
            {list.map((p) => (
              <tr data-testid="process" data-process={p.process_id}>
                <td><code>{p.command}</code>{p.background ? <span class="badge">background</span> : null}
                  {p.output_tail && <pre class="output-tail small" data-testid="output-tail" tabIndex={0} role="group" aria-label={`Last output of ${p.command}`}>{p.output_tail.split("\n").slice(-8).join("\n")}</pre>}</td>
                <td>{(p.state ?? "").replace("PROCESS_STATE_", "").toLowerCase()}{p.state === "PROCESS_STATE_EXITED" ? ` (${p.exit_code ?? 0})` : ""}</td>
                <td>{p.started_at_ms ? new Date(Number(p.started_at_ms)).toLocaleTimeString() : ""}</td>
                <td>{p.state === "PROCESS_STATE_RUNNING" && (
                  <button class="danger small" aria-label={`Kill ${p.command}`} onClick={async () => {
                    try {
                      const r = await api.killProcess(id, p.process_id);
                      setNote(r.message || `Killed ${p.command}.`);
                    } catch (e) {
                      setError((e as Error).message);
                    }
                    void load();
                  }}>Kill</button>
                )}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

/** steering returns the queued steering texts that the conversation does
 * not show yet; none once the task has ended. */
function steering(conv: Conversation, queued: string[], running: boolean): string[] {
  if (!running || !queued.length) return [];
  const shown = new Map<string, number>();
  for (const it of mainItems(conv)) {
    if (it.type === "user" && it.sender === "steering") shown.set(it.text, (shown.get(it.text) ?? 0) + 1);
  }
  return queued.filter((t) => {
    const n = shown.get(t) ?? 0;
    if (n > 0) shown.set(t, n - 1);
    return n === 0;
  });
}

/** UserText is a person's message; skills pinned to it show as chips
 * rather than as the raw [use_skills] block. */
function UserText({ text }: { text: string }) {
  const pinned = parseSkillsBlock(text);
  if (!pinned) return <p class="pre">{text}</p>;
  return (
    <>
      <p class="row small" data-testid="used-skills">Skills: {pinned.skills.map((n) => <span class="badge">{n}</span>)}</p>
      {pinned.rest && <p class="pre">{pinned.rest}</p>}
    </>
  );
}

/** The gap between two entries of the conversation, in pixels (the
 * stylesheet's .entry spacing, which the virtualizer adds between rows). */
const GAP = 8;

/** A reader this near the end of the conversation, in pixels, is at its
 * end: new output scrolls into view. */
const NEAR_END = 80;

/** estimate guesses an entry's height before it is measured, so that the
 * scrollbar is about right for a long session; each entry is measured
 * once it is rendered. The virtualizer asks again for every entry each
 * time it lays them out anew, so a guess is kept while its text keeps its
 * length (a streaming text grows). */
const guesses = new WeakMap<Item, [number, number]>();
function estimate(it: Item | undefined): number {
  if (!it) return 40;
  const text = it.type === "user" || it.type === "text" ? it.text : "";
  const kept = guesses.get(it);
  if (kept && kept[0] === text.length) return kept[1];
  const h = guess(it);
  guesses.set(it, [text.length, h]);
  return h;
}

function guess(it: Item): number {
  switch (it.type) {
    case "user":
      return 16 + 22 * lines(it.text);
    case "text":
      return 22 * lines(it.text) + 12 * (it.text.match(/\n\n/g)?.length ?? 0);
    case "tool":
    case "thinking":
      return 38;
    case "usage":
    case "notice":
      return 22;
    default:
      return 44;
  }
}

/** lines counts a text's lines as they wrap at about 100 characters. */
function lines(text: string): number {
  let n = 0;
  for (const l of text.split("\n")) n += 1 + Math.floor(l.length / 100);
  return n;
}

/** Messages is the conversation's scrolling list. Only the entries near
 * the viewport are in the page (with a few more on either side): a
 * session of 2,000 messages rendered whole, Markdown and all, took 2.4 to
 * 4 seconds to open, and a Markdown text is now parsed only when its
 * entry comes into view. The windowing is @tanstack/virtual-core's (a
 * small, framework-free core; its React adapter is a dozen lines, which
 * this does for Preact): it measures each rendered entry, keeps the
 * reader's place when entries above change height, and, anchored to the
 * end, follows new output while the reader is at the bottom. The list is
 * an ARIA feed of articles that say their position (aria-posinset of
 * aria-setsize), since most are not in the page; the box is focusable,
 * so the keyboard scrolls it (Home and End reach the first and the last
 * entry). Find in page sees only the rendered entries.
 *
 * tail holds what follows the conversation (a failed task's banner, the
 * steering not yet read by the model): entries of the list too, so that
 * following the end shows them. */
function Messages({ conv, items, tail, sessionId, busy }: {
  conv: Conversation; items: Item[]; tail: { key: string; node: ComponentChildren }[]; sessionId: string; busy: boolean;
}) {
  const box = useRef<HTMLDivElement>(null);
  const [, rerender] = useReducer((n: number) => n + 1, 0);
  const count = items.length + tail.length;
  const options = {
    count,
    getScrollElement: () => box.current,
    estimateSize: (i: number) => estimate(items[i]),
    getItemKey: (i: number) => (i < items.length ? items[i].key : tail[i - items.length].key),
    scrollToFn: elementScroll,
    observeElementRect,
    observeElementOffset,
    onChange: () => rerender(0),
    overscan: 6,
    gap: GAP,
    paddingStart: 12,
    paddingEnd: 12,
    anchorTo: "end" as const,
    followOnAppend: true,
    scrollEndThreshold: NEAR_END,
  };
  const [v] = useState(() => new Virtualizer<HTMLDivElement, HTMLElement>(options));
  v.setOptions(options);
  useLayoutEffect(() => v._didMount(), []);
  useLayoutEffect(() => v._willUpdate());
  // The box shrinks when an approval card or the reconnect countdown
  // appears below it: a reader at the end stays there.
  const follow = useRef(true);
  useEffect(() => {
    if (!box.current) return;
    const ro = new ResizeObserver(() => follow.current && v.scrollToEnd());
    ro.observe(box.current);
    return () => ro.disconnect();
  }, []);
  const rows = v.getVirtualItems();
  return (
    <div class="messages" data-testid="messages" ref={box} tabIndex={0}
      onScroll={(e) => {
        // The element's own figures: this runs before the virtualizer
        // reads the new offset.
        const el = e.currentTarget;
        follow.current = el.scrollHeight - el.scrollTop - el.clientHeight < NEAR_END;
      }}
      onKeyDown={(e) => {
        // Home and End go by entries: the browser's own smooth scroll
        // would stop wherever an entry it passes is measured.
        if (e.target !== box.current || (e.key !== "Home" && e.key !== "End")) return;
        e.preventDefault();
        if (e.key === "Home") v.scrollToIndex(0, { align: "start" });
        else v.scrollToEnd();
      }}>
      <div role="feed" aria-label="Messages" aria-busy={busy} class="thread" style={{ height: `${v.getTotalSize()}px` }}>
        {rows.map((r) => (
          <div role="article" key={r.key} class="entry" data-index={r.index} ref={v.measureElement}
            aria-posinset={r.index + 1} aria-setsize={count} style={{ transform: `translateY(${r.start}px)` }}>
            {r.index < items.length ? <ItemView it={items[r.index]} conv={conv} sessionId={sessionId} depth={0} /> : tail[r.index - items.length]?.node}
          </div>
        ))}
      </div>
    </div>
  );
}

function Thread({ conv, items, sessionId, depth }: { conv: Conversation; items: Item[]; sessionId: string; depth: number }) {
  return <>{items.map((it) => <ItemView key={it.key} it={it} conv={conv} sessionId={sessionId} depth={depth} />)}</>;
}

/** What the reader opened stays open: an entry scrolled out of view
 * leaves the page (see Messages) and is made anew when it comes back, so
 * the choice is kept with its item rather than in the element. A fold
 * the reader has not touched follows its default (a tool card opens
 * while it waits for approval, and closes after). */
const opened = new WeakMap<object, boolean>();
const shownAll = new WeakSet<ToolItem>();
const isOpen = (item: object, byDefault: boolean) => opened.get(item) ?? byDefault;
/** keepOpen handles a click on a fold's summary (the keyboard's Enter and
 * Space click it too), before the fold toggles. */
const keepOpen = (item: object) => (e: MouseEvent) => {
  opened.set(item, !((e.currentTarget as HTMLElement).parentElement as HTMLDetailsElement).open);
};

function ItemView({ it, conv, sessionId, depth }: { it: Item; conv: Conversation; sessionId: string; depth: number }) {
  switch (it.type) {
    case "user":
      return (
        <div class={`msg user ${it.sender && it.sender !== "user" ? "from-" + it.sender : ""}`}>
          {it.sender === "steering" && <span class="muted small">Steering </span>}
          {it.sender === "harness" ? <details open={isOpen(it, false)}><summary onClick={keepOpen(it)}>Note from the harness</summary><pre>{it.text}</pre></details> : <UserText text={it.text} />}
          {it.images?.map((src) => <img src={src} alt="" class="thumb" />)}
        </div>
      );
    case "text":
      return <div class={`msg assistant ${it.streaming ? "streaming" : ""}`}><Markdown text={it.text} />{it.stopReason && <span class="badge">{it.stopReason}</span>}</div>;
    case "thinking":
      return (
        <details class="thinking" open={isOpen(it, false)}>
          <summary onClick={keepOpen(it)}>{it.streaming ? "Thinking…" : "Thought"} <span class="muted small">{it.text.length} chars</span></summary>
          <p class="pre muted">{it.text}</p>
        </details>
      );
    case "tool":
      return <ToolCard t={it} conv={conv} sessionId={sessionId} depth={depth} />;
    case "compaction":
      return <div class="banner info" role="note">Context compaction ({it.reason ?? "?"}, {it.mode ?? "?"}){it.context ? ` at ${tokens(it.context)} tokens` : ""}: {it.status ?? "running…"}</div>;
    case "request_failed":
      return <div class="banner warn" role="note">Model request failed ({it.status}{it.attempt ? `, attempt ${it.attempt}` : ""}){it.error ? `: ${it.error}` : ""}{it.retryInMs ? ` · retrying in ${Math.round(it.retryInMs / 100) / 10}s` : ""}</div>;
    case "usage":
      return <div class="turn-usage muted small" data-testid="turn-usage" {...usageData(it.request)}>Turn: {usageLine(it.request)}{it.model ? ` · ${it.model}` : ""}</div>;
    case "abort":
      return <div class="banner warn" role="note">Aborted{it.reason ? `: ${it.reason}` : ""}</div>;
    case "subagent":
      return <Subagent conv={conv} threadKey={it.thread} sessionId={sessionId} depth={depth} />;
    case "notice":
      return <div class="muted small" data-testid="notice">{it.text}</div>;
  }
}

function Subagent({ conv, threadKey, sessionId, depth }: { conv: Conversation; threadKey: string; sessionId: string; depth: number }) {
  const th = thread(conv, threadKey);
  if (!th) return null;
  return (
    <details class="subagent" open={isOpen(th, depth < 1)}>
      <summary onClick={keepOpen(th)}>Subagent <code>{th.sessionId.slice(-8)}</code> <span class="muted small">{th.items.length} steps</span></summary>
      <div class="nested"><Thread conv={conv} items={th.items} sessionId={sessionId} depth={depth + 1} /></div>
    </details>
  );
}

function argsSummary(t: ToolItem): string {
  try {
    const a = JSON.parse(t.args);
    return String(a.cmd ?? a.file_path ?? a.path ?? a.prompt ?? a.pattern ?? "").split("\n")[0].slice(0, 120);
  } catch {
    return "";
  }
}

function pretty(args: string): string {
  try {
    return JSON.stringify(JSON.parse(args), null, 2);
  } catch {
    return args;
  }
}

function DiffView({ name, args }: { name: string; args: string }) {
  const ch = fileChange(name, args);
  if (!ch) return <pre class="args">{pretty(args)}</pre>;
  return (
    <div class="diff" data-testid="diff">
      <div class="diff-path">{ch.path}</div>
      <pre>{ch.lines.map((l) => <div class={`d-${l.kind}`}>{l.kind === "add" ? "+ " : l.kind === "del" ? "- " : "  "}{l.text}</div>)}</pre>
    </div>
  );
}

function toolStatus(t: ToolItem): string {
  if (t.awaiting) return "awaiting approval";
  if (t.decision === "deny") return "denied";
  if (t.decision === "forbidden") return "forbidden";
  if (t.output === undefined) return t.streaming ? "writing…" : "running";
  if (t.outputStreaming) return "running";
  return t.stopReason || "done";
}

function ToolCard({ t, conv, sessionId, depth }: { t: ToolItem; conv: Conversation; sessionId: string; depth: number }) {
  const status = toolStatus(t);
  return (
    <details class={`tool ${t.awaiting ? "awaiting" : ""}`} open={isOpen(t, !!t.awaiting || !!t.thread)} data-testid="tool-card" data-tool={t.name}>
      <summary onClick={keepOpen(t)}>
        <code class="tool-name">{t.name}</code> <span class="muted">{argsSummary(t)}</span>
        <span class={`badge ${t.stopReason === "failed" || t.stopReason === "aborted" || status === "denied" ? "error" : ""}`}>{status}</span>
      </summary>
      <DiffView name={t.name} args={t.args} />
      {t.thread && <Subagent conv={conv} threadKey={t.thread} sessionId={sessionId} depth={depth} />}
      {t.output !== undefined && <ToolOutput t={t} text={t.output} streaming={!!t.outputStreaming} />}
      {t.images?.map((src) => <img src={src} alt="tool output" class="thumb" />)}
    </details>
  );
}

/** Outputs longer than this many lines show their last lines until asked
 * for all: the end of a command's output is where its verdict is. */
const FOLD_LINES = 40;

function ToolOutput({ t, text, streaming }: { t: ToolItem; text: string; streaming: boolean }) {
  const [all, setAll] = useState(() => shownAll.has(t));
  const lines = text.split("\n");
  const folded = !all && lines.length > FOLD_LINES;
  return (
    <div class="output-wrap">
      {folded && <button type="button" class="link small" data-testid="show-all" onClick={() => { shownAll.add(t); setAll(true); }}>Show all {lines.length} lines</button>}
      <pre class={`output ${streaming ? "streaming" : ""}`} data-testid="tool-output" tabIndex={0} role="group" aria-label={`Output of ${t.name}`}>{folded ? lines.slice(-FOLD_LINES).join("\n") : text}</pre>
    </div>
  );
}

/** Markdown shows a sanitized rendering of the model's text (see
 * markdown.ts), highlighting its code once the text is on the page. */
function Markdown({ text }: { text: string }) {
  const ref = useRef<HTMLDivElement>(null);
  const html = useMemo(() => renderMarkdown(text), [text]);
  useEffect(() => {
    if (ref.current) void highlight(ref.current);
  }, [html]);
  return <div class="md" ref={ref} onClick={onCodeCopy} dangerouslySetInnerHTML={{ __html: html }} />;
}

function ApprovalCard({ p, onAnswer }: { p: PendingApproval; onAnswer: (allow: boolean) => void }) {
  const allow = useRef<HTMLButtonElement>(null);
  useEffect(() => allow.current?.focus(), []);
  return (
    <div class="approval" role="alertdialog" aria-label={`Approve ${p.name}?`} data-testid="approval-card"
      onKeyDown={(e) => { if (e.key === "y") onAnswer(true); if (e.key === "n") onAnswer(false); }}>
      <div><strong>Allow {p.name}?</strong> <span class="muted small">needs {p.permission === "rw" ? "read-write" : p.permission || "?"} access{p.origin.length ? ` · from subagent ${p.origin[p.origin.length - 1].slice(-8)}` : ""}</span></div>
      <DiffView name={p.name} args={p.args} />
      <div class="row">
        <button ref={allow} class="primary" onClick={() => onAnswer(true)}>Allow <kbd>y</kbd></button>
        <button onClick={() => onAnswer(false)}>Deny <kbd>n</kbd></button>
      </div>
    </div>
  );
}

/** RetryCountdown shows the wait before the next reconnect. The failed
 * request announces the wait a moment before the engine is in it, and
 * the engine cuts short only a wait it is in, so "Retry now" is offered
 * once the session's state says it waits. */
function RetryCountdown({ at, waiting, onRetry }: { at: number; waiting: boolean; onRetry: () => void }) {
  // The clock is read at each render (a new end can come between ticks);
  // the interval only renders again.
  const [, tick] = useState(0);
  useEffect(() => {
    const t = setInterval(() => tick((n) => n + 1), 250);
    return () => clearInterval(t);
  }, []);
  const left = Math.max(0, Math.ceil((at - Date.now()) / 1000));
  return (
    <div class="banner warn row" role="status" data-testid="retry">
      <span>Reconnecting to the model in {left}s</span>
      <button onClick={onRetry} disabled={!waiting}>Retry now</button>
    </div>
  );
}

function useFollowUps(id: string): [string[], (q: string[]) => void] {
  const key = `penguin.followups:${id}`;
  const [q, setQ] = useState<string[]>(() => {
    try {
      return JSON.parse(localStorage.getItem(key) ?? "[]");
    } catch {
      return [];
    }
  });
  return [q, (next) => {
    if (next.length) localStorage.setItem(key, JSON.stringify(next));
    else localStorage.removeItem(key);
    setQ(next);
  }];
}

const MODES = [
  ["APPROVAL_MODE_READ_ONLY", "read-only tools run, others ask"],
  ["APPROVAL_MODE_ALWAYS_ASK", "always ask"],
  ["APPROVAL_MODE_ALLOW_ALL", "allow all"],
  ["APPROVAL_MODE_DENY_ALL", "deny all"],
];
const LEVELS = ["THINKING_LEVEL_UNSPECIFIED", "THINKING_LEVEL_NONE", "THINKING_LEVEL_LOW", "THINKING_LEVEL_MEDIUM", "THINKING_LEVEL_HIGH", "THINKING_LEVEL_XHIGH", "THINKING_LEVEL_MAX"];
const levelWord = (l: string) => l === "THINKING_LEVEL_UNSPECIFIED" ? "model default" : l.slice(15).toLowerCase();

/** SessionControls changes the approval mode (at once, also mid-task),
 * the thinking level (from the next task; asked first, because a switch
 * mid-conversation lowers the prompt cache's hits) and what sending
 * during a task does. */
function SessionControls({ session, running, compacting, empty, onUpdate, onCompactThenSwitch, sendMode, onSendMode }: {
  session?: Session; running: boolean; compacting: boolean; empty: boolean;
  onUpdate: (b: { approval_mode?: string; thinking_level?: string }) => void;
  onCompactThenSwitch: (level: string) => void;
  sendMode: "steer" | "queue"; onSendMode: (m: "steer" | "queue") => void;
}) {
  const [asking, setAsking] = useState<string>();
  const level = session?.thinking_level ?? "THINKING_LEVEL_UNSPECIFIED";
  return (
    <div class="controls row small">
      <label>Approval <select aria-label="Approval mode" data-testid="approval-mode" value={session?.approval_mode} disabled={!session}
        onChange={(e) => onUpdate({ approval_mode: e.currentTarget.value })}>{MODES.map(([v, l]) => <option value={v}>{l}</option>)}</select></label>
      <label>Thinking <select aria-label="Thinking level" data-testid="thinking-level" value={level} disabled={!session}
        onChange={(e) => {
          const v = e.currentTarget.value;
          e.currentTarget.value = level;
          if (v === level) return;
          if (empty) onUpdate({ thinking_level: v });
          else setAsking(v);
        }}>{LEVELS.map((l) => <option value={l}>{levelWord(l)}</option>)}</select></label>
      <label>While a task runs, send <select aria-label="Sending during a task" data-testid="send-mode" value={sendMode}
        onChange={(e) => onSendMode(e.currentTarget.value as "steer" | "queue")}>
        <option value="steer">as steering (the model reads it at its next request)</option>
        <option value="queue">as a follow-up (a new task after this one)</option>
      </select></label>
      {asking && (
        <div class="dialog" role="dialog" aria-modal="true" aria-labelledby="switch-title" data-testid="thinking-dialog"
          onKeyDown={(e) => { if (e.key === "Escape") setAsking(undefined); }}>
          <h2 id="switch-title">Switch thinking to {levelWord(asking)}?</h2>
          <p>Switching mid-conversation lowers the prompt cache's hits and raises the cost of the next requests. Compacting first starts the cache afresh.</p>
          {(running || compacting) && <p class="muted">A compaction can only start on an idle conversation.</p>}
          <div class="row">
            <button class="primary" autoFocus disabled={running || compacting} onClick={() => { const l = asking; setAsking(undefined); onCompactThenSwitch(l); }}>Compact, then switch</button>
            <button onClick={() => { const l = asking; setAsking(undefined); onUpdate({ thinking_level: l }); }}>Switch anyway</button>
            <button onClick={() => setAsking(undefined)}>Cancel</button>
          </div>
        </div>
      )}
    </div>
  );
}

/** useLimits reads what a message may carry from the server, once per
 * page. */
let limitsOnce: Promise<AttachmentLimits> | undefined;
function useLimits(): AttachmentLimits | undefined {
  const [limits, setLimits] = useState<AttachmentLimits>();
  useEffect(() => {
    limitsOnce ??= api.defaults().then((d) => d.attachments ?? {}).catch(() => {
      limitsOnce = undefined;
      return {};
    });
    void limitsOnce.then(setLimits);
  }, []);
  return limits;
}

function Composer({ running, mode, recalled, skills, onSend, onAbort }: {
  running: boolean; mode: "steer" | "queue"; recalled?: string; skills: SkillInfo[];
  onSend: (text: string, goal: { budget: number } | undefined, att: Attachment[], skills: string[]) => Promise<void>; onAbort: () => void;
}) {
  // Skills pinned to the next message (RunRequest.skills): the engine
  // sends them as a [use_skills] block; with skills the text may be empty.
  const [pinned, setPinned] = useState<string[]>([]);
  const skillsMenu = useRef<HTMLDetailsElement>(null);
  const toggleSkill = (name: string, on: boolean) => setPinned((p) => (on ? [...p.filter((n) => n !== name), name] : p.filter((n) => n !== name)));
  const [text, setText] = useState("");
  useEffect(() => {
    if (recalled) setText((t) => (t ? t + "\n" : "") + recalled);
  }, [recalled]);
  // Goal mode: the message is a goal's objective, with an optional budget
  // (the chip); `/goal[:budget] objective` does the same in the box.
  const [goal, setGoal] = useState(false);
  const [budget, setBudget] = useState("");
  const [goalError, setGoalError] = useState("");
  // Attachments: pasted, dropped or picked; they go with a new task or a
  // steering message (a queued follow-up takes text files only).
  const limits = useLimits();
  const [att, setAtt] = useState<Attachment[]>([]);
  const [attError, setAttError] = useState("");
  const [dragging, setDragging] = useState(false);
  const picker = useRef<HTMLInputElement>(null);
  const attachAll = async (files: File[]) => {
    setAttError("");
    let have = att;
    const problems: string[] = [];
    for (const f of files) {
      try {
        have = [...have, await read(f, limits ?? {}, have)];
      } catch (e) {
        problems.push((e as Error).message);
      }
    }
    setAtt(have);
    if (problems.length) setAttError(problems.join(" "));
  };
  const send = async () => {
    let t = text.trim();
    const withSkills = !running && pinned.length > 0;
    if (!t && !att.some((a) => a.kind === "image") && !withSkills) return;
    if (running && mode === "queue" && att.some((a) => a.kind === "image")) {
      // A follow-up waits in this browser's storage, which is too small
      // for images: they go with a steering message or a new task.
      setAttError("A queued follow-up takes text files only: steer with the images, or send them when the task ends.");
      return;
    }
    let g: { budget: number } | undefined;
    try {
      const cmd = running ? null : goalCommand(t);
      if (cmd) {
        t = cmd.objective;
        g = { budget: cmd.budget };
      } else if (goal && !running) {
        g = { budget: parseBudget(budget) };
      }
    } catch (e) {
      setGoalError((e as Error).message);
      return;
    }
    setGoalError("");
    setAttError("");
    setText("");
    const sent = att;
    setAtt([]);
    const sentSkills = withSkills ? pinned : [];
    if (withSkills) setPinned([]);
    if (skillsMenu.current) skillsMenu.current.open = false;
    await onSend(t, g, sent, sentSkills);
  };
  return (
    <form class={`composer ${dragging ? "dragging" : ""}`} onSubmit={(e) => { e.preventDefault(); void send(); }}
      onDragOver={(e) => { if (e.dataTransfer?.types.includes("Files")) { e.preventDefault(); setDragging(true); } }}
      onDragLeave={() => setDragging(false)}
      onDrop={(e) => {
        setDragging(false);
        const files = [...(e.dataTransfer?.files ?? [])];
        if (!files.length) return;
        e.preventDefault();
        void attachAll(files);
      }}>
      {!running && pinned.length > 0 && (
        <ul class="attachments row" aria-label="Pinned skills" data-testid="pinned-skills">
          {pinned.map((n) => (
            <li class="attachment"><span class="badge">skill</span> <span class="small">{n}</span>
              <button type="button" class="link small" aria-label={`Unpin ${n}`} onClick={() => toggleSkill(n, false)}>✕</button></li>
          ))}
        </ul>
      )}
      {att.length > 0 && (
        <ul class="attachments row" aria-label="Attachments" data-testid="attachments">
          {att.map((a, i) => (
            <li class="attachment" data-testid="attachment">
              {a.kind === "image" ? <img src={a.content} alt={a.name} class="thumb" /> : <span class="badge">text</span>}
              <span class="small">{a.name} <span class="muted">{size(a.size)}</span></span>
              <button type="button" class="link small" aria-label={`Remove ${a.name}`} onClick={() => setAtt(att.filter((_, j) => j !== i))}>✕</button>
            </li>
          ))}
        </ul>
      )}
      <textarea
        aria-label={running ? (mode === "queue" ? "Queue a follow-up" : "Steer the running task") : "Message"}
        placeholder={running ? (mode === "queue" ? "A follow-up: sent as a new task when this one ends" : "Steer the task: this reaches the model at its next request") : "Ask for something… (paste or drop images and files)"}
        value={text} rows={2} data-testid="composer"
        onInput={(e) => setText((e.currentTarget as HTMLTextAreaElement).value)}
        onPaste={(e) => {
          const files = [...(e.clipboardData?.files ?? [])];
          if (!files.length) return;
          e.preventDefault();
          void attachAll(files);
        }}
        onKeyDown={(e) => {
          if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
            e.preventDefault();
            void send();
          }
          if (e.key === "Escape" && running) onAbort();
        }}
      />
      <div class="composer-buttons">
        <input ref={picker} type="file" multiple hidden data-testid="attach-input"
          accept={[...(limits?.image_types ?? []), "text/*", ".md,.txt,.json,.yaml,.yml,.go,.ts,.tsx,.js,.py,.sh,.csv,.log,.toml"].join(",")}
          onChange={(e) => {
            const input = e.currentTarget as HTMLInputElement;
            void attachAll([...(input.files ?? [])]);
            input.value = "";
          }} />
        <button type="button" onClick={() => picker.current?.click()}
          title="Attach images or text files (or paste or drop them)">Attach</button>
        {!running && skills.length > 0 && (
          <details class="skills-picker" data-testid="skills-picker" ref={skillsMenu}>
            <summary title="Pin skills of this session's agent to your next message">Skills{pinned.length ? ` (${pinned.length})` : ""}</summary>
            <ul class="skills-menu" aria-label="Skills for the next message">
              {skills.map((sk) => (
                <li><label title={sk.description}><input type="checkbox" checked={pinned.includes(sk.name)} data-testid={`skill-${sk.name}`}
                  onChange={(e) => toggleSkill(sk.name, (e.currentTarget as HTMLInputElement).checked)} /> {sk.name}
                  {sk.description && <span class="muted small"> {sk.description}</span>}</label></li>
              ))}
            </ul>
          </details>
        )}
        {!running && (
          <span class="goal-chip row" data-testid="goal-chip">
            <label><input type="checkbox" checked={goal} data-testid="goal-mode"
              onChange={(e) => setGoal((e.currentTarget as HTMLInputElement).checked)} /> Goal</label>
            {goal && <input class="goal-budget" aria-label="Goal budget" placeholder="budget: 500k, 2m; empty = none" size={14}
              value={budget} data-testid="goal-budget" onInput={(e) => setBudget((e.currentTarget as HTMLInputElement).value)} />}
          </span>
        )}
        <button type="submit" class="primary" disabled={!text.trim() && !att.some((a) => a.kind === "image") && (running || !pinned.length)}>{running ? (mode === "queue" ? "Queue" : "Steer") : goal ? "Start goal" : "Send"}</button>
        {running && <button type="button" class="danger" onClick={onAbort} title="Abort the task (Esc in the message box)">Abort</button>}
      </div>
      {goalError && <div class="banner error" role="alert" data-testid="goal-error">{goalError}</div>}
      {attError && <div class="banner error" role="alert" data-testid="attach-error">{attError}</div>}
      <div class="muted small hint">Enter sends · Shift+Enter new line{running ? " · Esc aborts" : " · /goal[:budget] objective starts a goal · paste, drop or attach images and text files"}</div>
    </form>
  );
}
