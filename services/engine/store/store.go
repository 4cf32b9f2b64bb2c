// Package store persists the engine's sessions: their metadata, their
// append-only event logs and the leases through which one engine replica owns
// a running session.
//
// The event log is the session's single source of truth, as a trace file
// is (docs/trace-format.md): it holds session_meta, complete model messages and events,
// never streaming partials and never messages forwarded from a subagent
// (those live in the child session's own log). Each event is stored as the
// protobuf encoding of its OmniMessage, which is compact and lossless: opaque
// provider fidelity bytes and the model's raw tool-call argument strings come
// back byte for byte, which some providers require when history is replayed.
// The large part of an event that every session of an agent logs alike
// (a session_meta's system prompt, a tool_list_ready's tools) is kept once
// per project and joined back when the log is read (payloads.go); readers
// never see the difference.
//
// Two implementations share one behaviour, pinned down by the conformance
// suite in package storetest: SQLite (modernc.org/sqlite, pure Go, the
// embedded default) and PostgreSQL (pgx/v5, for engine replicas that share
// sessions). [Open] picks one from a URL.
//
// # Errors
//
// Every method reports failures with errors that wrap one of the sentinel
// errors below, so that the gRPC layer can map them to status codes with
// errors.Is: [ErrNotFound], [ErrConflict], [ErrInvalid], [ErrCorrupt] and
// [ErrUnavailable]. An operation cut short by its context returns an error
// that wraps the context's error instead of ErrUnavailable, because the
// caller gave up rather than the database failing.
//
// # Torn records
//
// A transactional database never stores half a record, but a damaged
// database, a restore from a bad copy or a hand edit can leave a row whose
// payload no longer decodes. A trace file's reader tolerates a torn last
// line (docs/trace-format.md), and so does this store: when the last
// record of a session's log does not decode, ReadEvents logs a warning,
// moves the record into a quarantine table (so that later appends cannot
// turn it into a record in the middle of the log) and returns the records
// before it. A record in the
// middle of the log that does not decode is an error wrapping [ErrCorrupt]
// that names the session and the sequence number: silently skipping
// committed history would let a resumed session diverge from what the model
// saw.
package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/logger"
	"github.com/penguin-agent/penguin/internal/omni"
	"google.golang.org/protobuf/proto"
)

// Sentinel errors. Callers test for them with errors.Is; the messages of the
// wrapping errors say which session, sequence or argument was at fault.
var (
	// ErrNotFound reports an unknown session, or no live lease on a session.
	ErrNotFound = errors.New("store: not found")
	// ErrConflict reports a session id that already exists, or an append
	// whose sequence numbers are not strictly increasing above the session's
	// last sequence (typically because another writer got there first).
	ErrConflict = errors.New("store: conflict")
	// ErrInvalid reports an argument the store refuses: an empty id, a
	// partial or origin-tagged message, a malformed page token, a
	// non-positive lease duration, and the like.
	ErrInvalid = errors.New("store: invalid argument")
	// ErrCorrupt reports a stored record in the middle of a session's log
	// that no longer decodes.
	ErrCorrupt = errors.New("store: corrupt record")
	// ErrUnavailable reports that the database cannot be reached or cannot
	// serve the request right now (connection refused or lost, server
	// shutting down, file locked or unwritable, store closed). Callers map it
	// to codes.Unavailable; retrying later may succeed.
	ErrUnavailable = errors.New("store: unavailable")
	// ErrLeaseTaken reports a write that was to take a session's run
	// lease (SessionWrite.Claim) and did not: another replica holds it,
	// or held it and wrote the session's log since the caller read it.
	// Nothing of the write is stored.
	ErrLeaseTaken = errors.New("store: the session's run lease is another replica's")
)

// Limits on what the store accepts.
const (
	// MaxIDLength is the longest session id, lease owner or environment id
	// the store accepts, in bytes.
	MaxIDLength = 255
	// DefaultPageSize is the page size ListSessions uses when asked for zero
	// or fewer sessions.
	DefaultPageSize = 100
	// MaxPageSize caps ListSessions' page size.
	MaxPageSize = 1000
)

// Session is the metadata of one session. The store keeps it alongside the
// session's event log; everything the model saw lives in the log, not here.
type Session struct {
	// ID is the session's id. It is chosen by the engine and never changes.
	ID string
	// Provider and ModelID name the model that serves the session.
	Provider string
	ModelID  string
	// Workspace is the absolute path of the session's workspace.
	Workspace string
	// AgentState is the absolute path of the agent state directory.
	AgentState string
	// ApprovalMode decides which tool calls need a human.
	ApprovalMode penguinv1.ApprovalMode
	// ThinkingLevel is the default thinking level of the session's tasks.
	ThinkingLevel penguinv1.ThinkingLevel
	// Title is a short title, usually the first prompt cut short.
	Title string
	// ParentID is the parent session of a subagent; empty otherwise.
	ParentID string
	// Source says where the session came from: empty for a user-created
	// session, "subagent", "fork" or "schedule" otherwise.
	Source string
	// EnvironmentID and EnvironmentAddr name the environment bound to the
	// session and the address of the environment replica that holds it.
	EnvironmentID   string
	EnvironmentAddr string
	// Config is engine-owned JSON (max_turns, sandbox mode, system prompt
	// override, ...). The store keeps it verbatim and never looks inside.
	Config []byte
	// Usage holds the session's cumulative token counts. The store returns
	// it non-nil (all zero for a new session).
	Usage *penguinv1.TokenCounts
	// ProjectID is the project the session belongs to, fixed when it is
	// created: CreateSession stores an empty one as DefaultProject, and
	// UpdateSession never moves a session to another project.
	ProjectID string
	// CreatedAt is when the session was created. CreateSession fills it in
	// from the database's clock when it is zero.
	CreatedAt time.Time
	// UpdatedAt is when the session's log last grew. The store maintains it:
	// it equals CreatedAt until the first append, and AppendEvents moves it.
	UpdatedAt time.Time
	// LastSequence is the sequence number of the last persisted event, zero
	// for an empty log. The store maintains it.
	LastSequence int64
}

// Event is one persisted message of a session's log with its sequence
// number. Sequence numbers are the session's run-event numbers: they
// increase strictly, and gaps are normal because partials are numbered on
// the live stream but never persisted.
type Event struct {
	// Sequence is the event's number in the session, at least 1.
	Sequence int64
	// Message is the persisted message: session_meta, a complete model
	// message or an event, without an origin.
	Message *penguinv1.OmniMessage
}

// Store persists sessions, their event logs and run leases. All methods are
// safe for concurrent use, also from several processes sharing one
// database.
type Store interface {
	// Teams keeps users, projects, memberships, tokens, sign-ins and the
	// audit log (teams.go).
	Teams
	// ScheduleStore keeps the schedules' due times and runs
	// (schedules.go).
	ScheduleStore
	// ModelSettingsStore keeps projects' settings of models
	// (modelsettings.go).
	ModelSettingsStore

	// CreateSession creates a session from s. The id must be new
	// (ErrConflict otherwise) and non-empty. LastSequence and UpdatedAt in s
	// are ignored: a new session has an empty log. A zero CreatedAt is
	// filled in from the database's clock. On success the store writes the
	// stored CreatedAt, UpdatedAt and LastSequence back into s. first, when
	// given, opens the session's log in the same transaction, as
	// AppendEvents would: the session is created with them or not at all.
	CreateSession(ctx context.Context, s *Session, first ...Event) error

	// GetSession returns the session with the given id, or ErrNotFound.
	GetSession(ctx context.Context, id string) (*Session, error)

	// GetSessionAccess returns the session with the given id, as
	// GetSession does, and userID's membership of the session's project,
	// nil when userID is no member of it: what a call on the session
	// needs to be authorized, read in one statement where GetSession and
	// GetMember are two (two read transactions, each with its locks and
	// its pages read again on SQLite).
	GetSessionAccess(ctx context.Context, id, userID string) (*Session, *Member, error)

	// ReadForNewSession reads what creating a session asks of the store,
	// in one statement: the caller's memberships, the version of the
	// session's agent and the project's settings of its model, each
	// part only when the query names it. They are as fresh as the three
	// reads were, and read at one moment.
	ReadForNewSession(ctx context.Context, q NewSessionQuery) (*NewSessionRead, error)

	// ListSessions returns one page of sessions, newest first (by
	// CreatedAt, ties broken by id, descending), and the token of the next
	// page, empty on the last one. Paging is stable: sessions created or
	// deleted between pages neither repeat nor shift the pages that follow.
	// A pageSize of zero or less means DefaultPageSize; it is capped at
	// MaxPageSize. A token that this store did not produce is ErrInvalid.
	// Given projects (a non-nil slice, even an empty one), only the
	// sessions of those projects are listed; without, every session is.
	ListSessions(ctx context.Context, pageSize int, pageToken string, projects ...string) ([]*Session, string, error)

	// UpdateSession replaces the metadata of an existing session with the
	// fields of s: everything but ID, CreatedAt, UpdatedAt and LastSequence,
	// which the store owns. It never touches the event log. ErrNotFound for
	// an unknown session. Concurrent updates of one session are
	// last-writer-wins.
	UpdateSession(ctx context.Context, s *Session) error

	// ModifySession reads the session's metadata, hands it to f, and
	// stores what f made of it as UpdateSession would, atomically: no
	// other update of the row, from any replica, comes between the read
	// and the write. f may be called more than once (again on a fresh
	// read, when a store resolves a conflicting update by retrying), so
	// it must only change the session it is given. An error from f
	// stores nothing and is returned as it is. ErrNotFound for an unknown
	// session.
	ModifySession(ctx context.Context, id string, f func(*Session) error) error

	// DeleteSession deletes a session together with its event log and its
	// lease. ErrNotFound for an unknown session.
	DeleteSession(ctx context.Context, id string) error

	// AppendEvents appends events to a session's log atomically: either all
	// of them are stored or none. Their sequence numbers must be strictly
	// increasing and above the session's LastSequence; otherwise nothing is
	// stored and the error wraps ErrConflict, which is also what the loser of
	// two concurrent appends of the same sequence gets. Only session_meta,
	// complete model messages and events may be appended: a partial, an
	// origin-tagged message, a message without payload or a sequence below 1
	// is ErrInvalid. On success LastSequence becomes the last event's
	// sequence and UpdatedAt the database's current time. Appending no
	// events is a no-op. ErrNotFound for an unknown session.
	AppendEvents(ctx context.Context, sessionID string, events ...Event) error

	// WriteSession does in one transaction what AppendEvents(w.Events),
	// then ModifySession(w.Modify) when Modify is set, then w.Patch when
	// it is set, then ReleaseLease(w.ReleaseLease) when it is not empty
	// would do one after the other: all of it is stored, or none. Modify
	// and Patch see the row with the events appended (its LastSequence is
	// the last event's). A task's last events, its row and its lease are
	// one commit this way where they were three. Errors are those of the
	// three methods, and ErrNotFound for a patch of an unknown session.
	WriteSession(ctx context.Context, sessionID string, w SessionWrite) error

	// ReadEvents returns the session's events with a sequence above
	// afterSequence, in ascending order, at most limit of them (all of them
	// when limit is zero or less). A torn last record is skipped and
	// quarantined with a logged warning; a corrupt record in the middle of
	// the log is an error wrapping ErrCorrupt (see the package
	// documentation). ErrNotFound for an unknown session.
	ReadEvents(ctx context.Context, sessionID string, afterSequence int64, limit int) ([]Event, error)

	// AcquireLease makes owner (an engine replica's id, reachable at
	// ownerAddr) the owner of the session's run for ttl, measured on the
	// database's clock so that replicas with skewed clocks agree. It returns
	// true when the lease was free, expired or already held by owner (then
	// it is renewed and ownerAddr updated), and false while another owner
	// holds a live lease. The decision is one atomic statement, so of many
	// concurrent contenders exactly one wins. ErrNotFound for an unknown
	// session; ErrInvalid for an empty owner or a ttl below one
	// millisecond.
	AcquireLease(ctx context.Context, sessionID, owner, ownerAddr string, ttl time.Duration) (bool, error)

	// ReleaseLease gives up owner's lease on the session. Releasing a lease
	// that owner does not hold (never taken, expired and taken over, or
	// already released) does nothing and is not an error, so a replica can
	// release unconditionally when a run ends.
	ReleaseLease(ctx context.Context, sessionID, owner string) error

	// LeaseHolder returns the owner, its address and the expiry (on the
	// database's clock) of the session's live lease. ErrNotFound when no
	// live lease exists, including for an unknown session.
	LeaseHolder(ctx context.Context, sessionID string) (owner, ownerAddr string, expires time.Time, err error)

	// StaleLeases returns the sessions whose lease has expired, and those
	// whose lease owner holds whatever its expiry, oldest expiry first. A
	// lease row outlives its run only when the replica that ran it died
	// (a finished run releases it), so these are the runs that were cut
	// off: a replica resumes them, and a restarted replica finds its own.
	StaleLeases(ctx context.Context, owner string) ([]string, error)

	// PeekLease reads what a task starts from without taking the
	// session's lease: the row, whether a lease row is on the session
	// (Leased), the project's settings of the row's model (Model), the
	// version of agent when it is given (the agent the caller expects the
	// row's AgentState to name: LeaseRead.Agent), and, on a store that
	// can read it cheaply (SQLite, on its writer's connection), the whole
	// log when it holds at most LeaseReadEvents events. All of it is read
	// at one moment. A task that found no lease takes it with its first
	// write (SessionWrite.Claim), which refuses it when the log has moved
	// since. ErrNotFound for an unknown session.
	PeekLease(ctx context.Context, sessionID string, agent AgentRef) (*LeaseRead, error)

	// LeaseCutOff reports whether StaleLeases(owner) would return the
	// session: one session's answer without listing them all, for a
	// replica that is asked to follow a session whose run may wait for a
	// new owner.
	LeaseCutOff(ctx context.Context, sessionID, owner string) (bool, error)

	// Now returns the database's current time, the clock that lease expiry
	// and UpdatedAt are measured on. A replica uses it to schedule lease
	// renewals without trusting its own clock.
	Now(ctx context.Context) (time.Time, error)

	// Close releases the store's connections. Calls after Close fail with
	// ErrUnavailable; closing twice is harmless.
	Close() error
}

// LeaseReader is a store that takes a session's run lease and reads what
// a task prepares from in the same transaction: the SQLite store, on its
// writer's connection, whose pages are current (a reader connection
// reads again every page it needs after each commit of the writer, and a
// new session's log is some 15 of them). What it reads is as fresh as a
// read after the lease would be: no other replica may start a task on
// the session from then on.
type LeaseReader interface {
	// AcquireLeaseRead is AcquireLease that also returns, when the lease
	// was taken, what it read with it.
	AcquireLeaseRead(ctx context.Context, sessionID, owner, ownerAddr string, ttl time.Duration) (bool, *LeaseRead, error)
}

// LeaseReadEvents is the longest log a LeaseReader reads with the lease:
// a longer one is left to ReadEvents, on the readers, so that the lease's
// transaction stays short for every other session's writes.
const LeaseReadEvents = 16

// LeaseRead is what a LeaseReader read with a session's lease, or
// PeekLease without one.
type LeaseRead struct {
	// Leased says a lease row was on the session, live or expired
	// (PeekLease only): a run holds the session, or was cut off.
	Leased bool
	// Row is the session's row.
	Row *Session
	// Log is the session's whole log, as ReadEvents(0) returns it, when
	// it holds at most LeaseReadEvents events; Whole says it does.
	Log   []Event
	Whole bool
	// ModelRead says Model was read with Row, at the same moment
	// (PeekLease): the task takes the project's settings of the row's
	// model from here instead of a read of its own. The settings are as
	// fresh as the row, so a change made before the Run holds.
	ModelRead bool
	// Model is the project's settings of Row's model (GetModelSetting of
	// Row's project, DefaultProject when it has none), nil when it has
	// none.
	Model *ModelSetting
	// Agent is the agent PeekLease was asked for. AgentRead says its
	// version was read with Row, at the same moment: AgentVersion is
	// the agent's version then (GetAgent's), zero when the store held no
	// such agent. A task whose row names that agent brings its working
	// copy up to date from here instead of asking for the version again;
	// an edit of the agent made before the Run holds.
	Agent        AgentRef
	AgentRead    bool
	AgentVersion int64
}

// AgentRef names an agent of a project; the zero AgentRef names none.
type AgentRef struct{ Project, Name string }

// ReadCounter is a store that counts the statements it runs on its
// readers: with the tasks run, it says how many reads a task costs
// (docs/performance.md). The SQLite store is one; the engine exports the
// count as the metric penguin_engine_store_reads_total.
type ReadCounter interface {
	// Reads returns the number of statements run on the readers since
	// the store was opened.
	Reads() int64
}

// SessionWrite is what one WriteSession commits.
type SessionWrite struct {
	// Events are appended to the session's log, as AppendEvents would.
	Events []Event
	// Modify, when set, changes the session's row, as ModifySession's f.
	Modify func(*Session) error
	// Patch, when set, changes a few of the session's columns after
	// Modify, without reading the row (SessionPatch).
	Patch *SessionPatch
	// ReleaseLease, when set, is the owner whose lease on the session is
	// given up, as ReleaseLease would.
	ReleaseLease string
	// Claim, when set, is a run lease taken before anything else, as
	// AcquireLease would: a task that read the session without its lease
	// (PeekLease) takes it with its first write instead of in a
	// transaction of its own. The write fails with ErrLeaseTaken, and
	// stores nothing, when another owner holds a live lease or the
	// session's LastSequence is no longer Claim.LastSequence (another
	// replica ran a task since the read).
	Claim *LeaseClaim
}

// LeaseClaim is a run lease that a write takes (SessionWrite.Claim).
type LeaseClaim struct {
	Owner, OwnerAddr string
	TTL              time.Duration
	// LastSequence is the session's LastSequence as the task read it.
	LastSequence int64
}

// SessionPatch is a change of a few of a session's columns that a store
// makes in one UPDATE of those columns alone, without reading the row:
// the changes a task makes at each of its commits (its title, its
// environment, how it ended), for which Modify would read the row back
// and write every column of it. It is atomic as Modify is: a column it
// derives from the row (a title set only where there is none, a config
// member raised) is read by the UPDATE itself, which holds the row. Zero
// fields change nothing; a patch of no field still fails with
// ErrNotFound for an unknown session.
//
// A store runs one statement for each shape of patch (which fields are
// set and the rules of its config changes, not their values or keys), so
// the few patches of an engine are a few prepared statements.
type SessionPatch struct {
	// Title becomes the session's title if it has none; a session that
	// has one keeps it.
	Title string
	// ApprovalMode, unless unspecified, replaces the session's.
	ApprovalMode penguinv1.ApprovalMode
	// Environment, when set, replaces the session's EnvironmentID and
	// EnvironmentAddr.
	Environment *EnvironmentBinding
	// Usage, when set, replaces the session's token counts.
	Usage *penguinv1.TokenCounts
	// Config changes members of the session's Config, a JSON object (an
	// empty Config is taken as {}); each key at most once, or the write
	// is ErrInvalid. The other members are left as they are, whoever
	// wrote them.
	Config []ConfigChange
}

// EnvironmentBinding names the environment a SessionPatch binds.
type EnvironmentBinding struct {
	ID, Addr string
}

// ConfigChange is the change of one top-level member of a session's JSON
// config (SessionPatch.Config).
type ConfigChange struct {
	// Key names the member: lower-case letters, digits and underscores
	// (ErrInvalid otherwise).
	Key string
	// Rule says what becomes of the member.
	Rule ConfigRule
	// Value is the JSON value that ConfigSet sets; empty removes the
	// member.
	Value []byte
	// N is the integer that ConfigRaise raises the member to.
	N int64
}

// ConfigRule is what a ConfigChange makes of its member.
type ConfigRule uint8

const (
	// ConfigSet sets the member to Value, or removes it when Value is
	// empty.
	ConfigSet ConfigRule = iota
	// ConfigRaise sets the member, an integer (0 when absent), to N when
	// N is larger.
	ConfigRaise
	// ConfigLastSequence sets the member to the session's LastSequence,
	// with the write's events appended.
	ConfigLastSequence
)

// Option configures a store opened with [Open].
type Option func(*options)

type options struct {
	logger *slog.Logger
}

// WithLogger sets the logger the store reports torn records and other
// recoverable oddities to. Without it they are discarded.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

func buildOptions(opts []Option) options {
	o := options{logger: logger.OrDiscard(nil)}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// Open opens the store named by url and brings its schema up to date.
//
// A URL starting with "postgres://" or "postgresql://" opens PostgreSQL
// through a pgx/v5 connection pool. The URL takes pgx's parameters
// (pool_max_conns, connect_timeout, sslmode, ...), and any other parameter
// is set on every connection: search_path selects the schema, and
// synchronous_commit=off trades the last few hundred milliseconds of
// appends on a server crash for appends that do not wait for the server's
// fsync (about 5x faster on a slow disk; the log stays consistent either
// way). "sqlite:PATH", "file:PATH" or a
// plain path opens (and creates, with its parent directories) a SQLite
// database file in WAL mode; ":memory:" opens a private in-memory SQLite
// database, for tests. Open fails with an error wrapping ErrUnavailable when
// the database cannot be reached before ctx ends, and with ErrInvalid for a
// URL it does not understand.
func Open(ctx context.Context, url string, opts ...Option) (Store, error) {
	o := buildOptions(opts)
	switch {
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		return openPostgres(ctx, url, o)
	case url == "":
		return nil, fmt.Errorf("%w: empty store URL", ErrInvalid)
	case url == ":memory:":
		return openSQLite(ctx, "", o)
	}
	path := url
	switch {
	case strings.HasPrefix(path, "sqlite://"):
		path = strings.TrimPrefix(path, "sqlite://")
	case strings.HasPrefix(path, "sqlite:"):
		path = strings.TrimPrefix(path, "sqlite:")
	case strings.HasPrefix(path, "file:"):
		path = strings.TrimPrefix(path, "file:")
	default:
		if i := strings.Index(path, "://"); i > 0 && !strings.ContainsAny(path[:i], "/\\") {
			return nil, fmt.Errorf("%w: unsupported store URL scheme %q (want postgres://, postgresql://, sqlite:, file: or a path)", ErrInvalid, path[:i])
		}
	}
	if path == "" {
		return nil, fmt.Errorf("%w: store URL %q has no path", ErrInvalid, url)
	}
	if path == ":memory:" {
		return openSQLite(ctx, "", o)
	}
	return openSQLite(ctx, path, o)
}

// encodedEvent is an event ready for the database: its payload kind (the
// trace format's payload type, such as "text" or "request_end") and its
// protobuf bytes, split into the row's body and, for an event with a
// large part that other sessions log too, that shared part and its key
// (payloads.go; keyShared sets the key once the project is known).
type encodedEvent struct {
	seq     int64
	kind    string
	payload []byte
	key     []byte
	shared  []byte
}

// encodeEvents validates a batch of events for AppendEvents and encodes it.
// It checks everything that can be checked without the database, so that a
// bad batch never opens a transaction. The encodings live in buf, which
// the caller gives back with releaseBuffer once the write that carries
// them returned.
func encodeEvents(sessionID string, events []Event) (out []encodedEvent, buf *[]byte, err error) {
	if err := checkID("session id", sessionID); err != nil {
		return nil, nil, err
	}
	buf = encodeBuffers.Get().(*[]byte)
	defer func() {
		if err != nil {
			releaseBuffer(buf)
			buf = nil
		}
	}()
	out = make([]encodedEvent, 0, len(events))
	b := (*buf)[:0]
	var prev int64
	for i, e := range events {
		if e.Sequence < 1 {
			return nil, nil, fmt.Errorf("%w: session %s: event %d has sequence %d; sequences start at 1", ErrInvalid, sessionID, i, e.Sequence)
		}
		if i > 0 && e.Sequence <= prev {
			return nil, nil, fmt.Errorf("%w: session %s: sequence %d follows %d in one append; sequences must increase strictly", ErrConflict, sessionID, e.Sequence, prev)
		}
		prev = e.Sequence
		kind, err := persistableKind(e.Message)
		if err != nil {
			return nil, nil, fmt.Errorf("session %s sequence %d: %w", sessionID, e.Sequence, err)
		}
		start := len(b)
		if b, err = (proto.MarshalOptions{}).MarshalAppend(b, e.Message); err != nil {
			return nil, nil, fmt.Errorf("%w: session %s sequence %d: encode: %v", ErrInvalid, sessionID, e.Sequence, err)
		}
		ev := encodedEvent{seq: e.Sequence, kind: kind}
		b, ev.payload, ev.shared = splitShared(b, b[start:len(b):len(b)])
		out = append(out, ev)
	}
	*buf = b
	return out, buf, nil
}

// persistableKind returns the payload kind of m, or ErrInvalid when m does
// not belong in a log.
func persistableKind(m *penguinv1.OmniMessage) (string, error) {
	switch omni.KindOf(m) {
	case omni.KindUnknown:
		return "", fmt.Errorf("%w: message has no payload", ErrInvalid)
	case omni.KindPartial:
		return "", fmt.Errorf("%w: %s is a streaming partial; the log holds only session_meta, complete messages and events", ErrInvalid, PayloadKind(m))
	}
	if len(m.GetOrigin()) > 0 {
		return "", fmt.Errorf("%w: message has origin %v; a subagent's messages belong to the child session's own log", ErrInvalid, m.GetOrigin())
	}
	return PayloadKind(m), nil
}

// PayloadKind returns the name of m's payload, which is the trace
// format's payload type ("session_meta", "text", "tool_call", "request_end", ...),
// or "" when no payload is set. The store keeps it in a column next to each
// event so that logs can be filtered by kind without decoding them.
func PayloadKind(m *penguinv1.OmniMessage) string {
	r := m.ProtoReflect()
	od := r.Descriptor().Oneofs().ByName("payload")
	if od == nil {
		return ""
	}
	fd := r.WhichOneof(od)
	if fd == nil {
		return ""
	}
	return string(fd.Name())
}

// checkID validates an id-like argument.
func checkID(what, id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty %s", ErrInvalid, what)
	case len(id) > MaxIDLength:
		return fmt.Errorf("%w: %s is %d bytes long; at most %d allowed", ErrInvalid, what, len(id), MaxIDLength)
	}
	return nil
}

// checkLease validates the arguments of AcquireLease.
func checkLease(sessionID, owner string, ttl time.Duration) error {
	if err := checkID("session id", sessionID); err != nil {
		return err
	}
	if err := checkID("lease owner", owner); err != nil {
		return err
	}
	if ttl < time.Millisecond {
		return fmt.Errorf("%w: lease ttl %v is below 1ms", ErrInvalid, ttl)
	}
	return nil
}

// normalizePageSize applies the default and the cap.
func normalizePageSize(n int) int {
	switch {
	case n <= 0:
		return DefaultPageSize
	case n > MaxPageSize:
		return MaxPageSize
	}
	return n
}

// decodeEvents turns raw rows into events. A row that does not decode
// (its body, or its shared part: missing, damaged or of another kind) is
// reported through torn: the callback decides (by asking the database
// whether a later record exists) whether it is a torn tail to skip or a
// corrupt record in the middle. Rows are in ascending order.
func decodeEvents(sessionID string, rows []storedEvent, torn func(seq int64, cause error) error) ([]Event, error) {
	out := make([]Event, 0, len(rows))
	for _, r := range rows {
		m, err := decodeStored(r.kind, r.body, r.hasShared, r.shared)
		if err != nil {
			if terr := torn(r.seq, err); terr != nil {
				return nil, terr
			}
			continue
		}
		out = append(out, Event{Sequence: r.seq, Message: m})
	}
	return out, nil
}

// corruptError is the error for a corrupt record in the middle of a log.
func corruptError(sessionID string, seq int64, cause error) error {
	return fmt.Errorf("%w: session %s sequence %d does not decode and later records exist: %v", ErrCorrupt, sessionID, seq, cause)
}

// closedError is what every method returns after Close.
func closedError(op string) error {
	return fmt.Errorf("%s: %w: store is closed", op, ErrUnavailable)
}

// ctxError wraps err for op when the context ended, so that callers see the
// context's error rather than ErrUnavailable. It returns nil when ctx is
// still live.
func ctxError(ctx context.Context, op string, err error) error {
	if ctx.Err() == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s: %w (%v)", op, context.Cause(ctx), err)
}
