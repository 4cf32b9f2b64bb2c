import { useEffect, useState } from "preact/hooks";
import { schedules, template, withEnabled, type Schedule, type ScheduleRun } from "../schedules";
import { onLink } from "../router";

const when = (t?: string) => (t ? new Date(t).toLocaleString() : "—");

/** RunCell shows a run's state and due time, linking to its session. */
function RunCell({ run }: { run?: ScheduleRun }) {
  if (!run) return <span>—</span>;
  return (
    <span title={run.reason}>
      {run.state} {when(run.due_at)}
      {run.session_id && <> · <a href={`/sessions/${encodeURIComponent(run.session_id)}`} onClick={onLink}>session</a></>}
      {run.reason && <span class="small"> ({run.reason})</span>}
    </span>
  );
}

/** SchedulesTab lists an agent's schedules with their next run and last
 * result: enable or disable each, run it now, see its past runs, edit its
 * definition (the YAML of schedule/<name>.yaml, validated by the engine)
 * or delete it, and create one. */
export function SchedulesTab({ agent }: { agent: string }) {
  const [list, setList] = useState<Schedule[]>();
  const [note, setNote] = useState<{ ok: boolean; text: string }>();
  const [editing, setEditing] = useState<{ name: string; yaml: string; isNew: boolean }>();
  const [history, setHistory] = useState<{ name: string; runs: ScheduleRun[] }>();
  const reload = () => schedules.list(agent).then((r) => setList(r.schedules ?? [])).catch((e) => setNote({ ok: false, text: e.message }));
  useEffect(() => { void reload(); }, [agent]);
  const act = async (f: () => Promise<unknown>, done = "") => {
    try {
      await f();
      setNote(done ? { ok: true, text: done } : undefined);
      await reload();
      return true;
    } catch (e) {
      setNote({ ok: false, text: (e as Error).message });
      return false;
    }
  };
  const save = async () => {
    if (!editing) return;
    const ok = await act(() => editing.isNew
      ? schedules.create(agent, editing.name.trim(), editing.yaml)
      : schedules.update(agent, editing.name, editing.yaml), "Saved.");
    if (ok) setEditing(undefined);
  };
  const showHistory = async (name: string) => {
    try { setHistory({ name, runs: (await schedules.runs(agent, name)).runs ?? [] }); } catch (e) { setNote({ ok: false, text: (e as Error).message }); }
  };
  return (
    <div>
      {note && <p class={`banner ${note.ok ? "" : "error"}`} role={note.ok ? "status" : "alert"}>{note.text}</p>}
      <table class="table" aria-label="Schedules">
        <thead><tr><th>Name</th><th>Enabled</th><th>Cadence</th><th>Next run</th><th>Last run</th><th /></tr></thead>
        <tbody>{(list ?? []).map((s) => (
          <tr data-schedule={s.name}>
            <td>{s.name}</td>
            <td><input type="checkbox" aria-label={`enable ${s.name}`} checked={!!s.enabled} disabled={!!s.error}
              onChange={(e) => act(() => schedules.update(agent, s.name, withEnabled(s.yaml ?? "", e.currentTarget.checked)))} /></td>
            <td>{s.error ? <span class="error" role="note">invalid: {s.error}</span> : s.cadence}</td>
            <td data-testid={`next-${s.name}`}>{when(s.next_run)}</td>
            <td data-testid={`last-${s.name}`}><RunCell run={s.last_run} /></td>
            <td>
              <button onClick={() => act(() => schedules.runNow(agent, s.name), `${s.name} runs now.`)}>Run now</button>{" "}
              <button onClick={() => showHistory(s.name)}>History</button>{" "}
              <button onClick={() => setEditing({ name: s.name, yaml: s.yaml ?? "", isNew: false })}>Edit</button>{" "}
              <button class="danger" onClick={() => confirm(`Delete schedule ${s.name}?`) && act(() => schedules.remove(agent, s.name))}>Delete</button>
            </td>
          </tr>
        ))}</tbody>
      </table>
      {list && list.length === 0 && <p class="small">No schedules yet.</p>}
      <p><button onClick={() => setEditing({ name: "", yaml: template(), isNew: true })}>New schedule</button>{" "}
        <button onClick={() => void reload()}>Refresh</button></p>
      {editing && (
        <div class="form" aria-label="Schedule definition">
          {editing.isNew
            ? <label>Name <input aria-label="Schedule name" required value={editing.name} onInput={(e) => setEditing({ ...editing, name: e.currentTarget.value })} /></label>
            : <p>schedule/{editing.name}.yaml</p>}
          <label>Definition (YAML: prompt, enabled, start_at, period or cron and timezone, end_at, session_id or workspace with provider and model_id, missed, overlap)
            <textarea aria-label="Schedule YAML" rows={10} spellcheck={false} class="mono" value={editing.yaml} onInput={(e) => setEditing({ ...editing, yaml: e.currentTarget.value })} /></label>
          <div><button class="primary" onClick={save}>Save</button> <button onClick={() => setEditing(undefined)}>Cancel</button></div>
        </div>
      )}
      {history && (
        <div aria-label={`History of ${history.name}`}>
          <h3>Runs of {history.name}</h3>
          <table class="table"><thead><tr><th>Due</th><th>State</th><th>Session</th><th>Reason</th></tr></thead>
            <tbody>{history.runs.map((r) => (
              <tr><td>{when(r.due_at)}</td><td>{r.state}</td>
                <td>{r.session_id && <a href={`/sessions/${encodeURIComponent(r.session_id)}`} onClick={onLink}>{r.session_id}</a>}</td>
                <td>{r.reason}</td></tr>
            ))}</tbody></table>
        </div>
      )}
    </div>
  );
}
