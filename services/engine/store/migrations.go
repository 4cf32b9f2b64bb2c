package store

import (
	"fmt"
	"strings"
)

// A migration is one step of a database schema, applied once, in order, and
// recorded in the schema_migrations table. Migrations are append-only: a
// released step is never edited, a change is a new step.
type migration struct {
	version int
	stmts   []string
}

// schemaScript is every statement of migrations, each followed by the
// row that records its version as applied at appliedAt (microseconds), as
// one script: a new SQLite database's whole schema in one Exec. It makes
// the same schema as the migrations applied one by one
// (TestNewSchemaAsMigrated).
func schemaScript(migrations []migration, appliedAt int64) string {
	var b strings.Builder
	for _, m := range migrations {
		for _, stmt := range m.stmts {
			b.WriteString(stmt)
			b.WriteString(";\n")
		}
		fmt.Fprintf(&b, "INSERT INTO schema_migrations (version, applied_at) VALUES (%d, %d);\n", m.version, appliedAt)
	}
	return b.String()
}

// sqliteMigrations returns the SQLite schema. Times are INTEGER microseconds
// since the Unix epoch, UTC, the precision PostgreSQL keeps too.
func sqliteMigrations() []migration {
	return []migration{
		{version: 1, stmts: []string{
			`CREATE TABLE sessions (
			id               TEXT    PRIMARY KEY,
			provider         TEXT    NOT NULL DEFAULT '',
			model_id         TEXT    NOT NULL DEFAULT '',
			workspace        TEXT    NOT NULL DEFAULT '',
			agent_state      TEXT    NOT NULL DEFAULT '',
			approval_mode    INTEGER NOT NULL DEFAULT 0,
			thinking_level   INTEGER NOT NULL DEFAULT 0,
			title            TEXT    NOT NULL DEFAULT '',
			parent_id        TEXT    NOT NULL DEFAULT '',
			source           TEXT    NOT NULL DEFAULT '',
			environment_id   TEXT    NOT NULL DEFAULT '',
			environment_addr TEXT    NOT NULL DEFAULT '',
			config           BLOB,
			usage_cache_read  INTEGER NOT NULL DEFAULT 0,
			usage_cache_write INTEGER NOT NULL DEFAULT 0,
			usage_output      INTEGER NOT NULL DEFAULT 0,
			usage_total       INTEGER NOT NULL DEFAULT 0,
			created_at       INTEGER NOT NULL,
			updated_at       INTEGER NOT NULL,
			last_sequence    INTEGER NOT NULL DEFAULT 0
		)`,
			`CREATE INDEX sessions_newest ON sessions (created_at DESC, id DESC)`,
			`CREATE INDEX sessions_parent ON sessions (parent_id) WHERE parent_id <> ''`,
			`CREATE TABLE events (
			session_id  TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
			seq         INTEGER NOT NULL,
			kind        TEXT    NOT NULL,
			payload     BLOB    NOT NULL,
			appended_at INTEGER NOT NULL,
			PRIMARY KEY (session_id, seq)
		)`,
			// Appending an event advances its session in the same statement, so
			// that a single-event append is one autocommit INSERT.
			`CREATE TRIGGER events_advance_session AFTER INSERT ON events
		BEGIN
			UPDATE sessions SET last_sequence = NEW.seq, updated_at = NEW.appended_at
			WHERE id = NEW.session_id AND last_sequence < NEW.seq;
		END`,
			`CREATE TABLE torn_events (
			session_id     TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
			seq            INTEGER NOT NULL,
			kind           TEXT    NOT NULL,
			payload        BLOB    NOT NULL,
			quarantined_at INTEGER NOT NULL,
			PRIMARY KEY (session_id, seq)
		)`,
			`CREATE TABLE leases (
			session_id TEXT    PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
			owner      TEXT    NOT NULL,
			owner_addr TEXT    NOT NULL DEFAULT '',
			expires_at INTEGER NOT NULL
		)`,
		}},
		// The rest of a session's token counts: reasoning, the cost (NULL
		// while no request of the session had a known price) and whether
		// some request's usage was not reported.
		{version: 2, stmts: []string{
			`ALTER TABLE sessions ADD COLUMN usage_reasoning INTEGER NOT NULL DEFAULT 0`,
			`ALTER TABLE sessions ADD COLUMN usage_cost_usd REAL`,
			`ALTER TABLE sessions ADD COLUMN usage_unreported INTEGER NOT NULL DEFAULT 0`,
		}},
		// Agents and their files (see AgentStore).
		{version: 3, stmts: []string{
			`CREATE TABLE agents (
			project    TEXT    NOT NULL,
			name       TEXT    NOT NULL,
			version    INTEGER NOT NULL,
			updated_at INTEGER NOT NULL,
			PRIMARY KEY (project, name)
		)`,
			`CREATE TABLE agent_files (
			project TEXT    NOT NULL,
			agent   TEXT    NOT NULL,
			path    TEXT    NOT NULL,
			data    BLOB    NOT NULL,
			version INTEGER NOT NULL,
			PRIMARY KEY (project, agent, path),
			FOREIGN KEY (project, agent) REFERENCES agents (project, name) ON DELETE CASCADE ON UPDATE CASCADE
		)`,
		}},
		// The ownership model (docs/decisions.md, "Projects and who may
		// see what"): users, projects, memberships, personal access tokens,
		// login sessions and the audit log, and the project of every
		// session. Existing sessions belong to the project "default",
		// owned by the user "admin"; both are created here, so a database
		// that predates them moves into the model as it is. Times in these
		// tables are microseconds since the Unix epoch in both dialects, so
		// that one implementation (teamsql.go) serves both.
		{version: 4, stmts: teamsMigration("INTEGER PRIMARY KEY AUTOINCREMENT", "BLOB",
			`CAST(strftime('%s', 'now') AS INTEGER) * 1000000`)},
		// Schedules and their runs (see ScheduleStore).
		{version: 5, stmts: schedulesMigration("BLOB")},
		// Sign-ins with an identity provider under way (see SignInState).
		{version: 6, stmts: signInStatesMigration("BLOB")},
		// Sign-ins started by a command-line client (SignInState.Loopback).
		{version: 7, stmts: []string{signInLoopbackMigration}},
		// Projects' settings of models (see ModelSettingsStore).
		{version: 8, stmts: modelSettingsMigration()},
		// Large parts of events kept once per project (payloads.go).
		{version: 9, stmts: sharedPayloadsMigration("BLOB", " WITHOUT ROWID")},
		// The sessions' indexes by time in ascending order. SQLite
		// keeps a DESC index's newest key first, so every new session
		// went in at the index's left edge, where a full leaf is
		// rebalanced with its two siblings and their parent: four pages
		// of sessions_newest written at each CreateSession, and some of
		// sessions_project, where an ascending index takes the new key at
		// its right edge, in one page (docs/performance.md, thirteenth
		// round). The listings read them backwards, with the same plans.
		// PostgreSQL's B-tree has no such cost and keeps its indexes.
		{version: 10, stmts: []string{
			`DROP INDEX sessions_newest`,
			`CREATE INDEX sessions_newest ON sessions (created_at, id)`,
			`DROP INDEX sessions_project`,
			`CREATE INDEX sessions_project ON sessions (project_id, created_at, id)`,
		}},
	}
}

// postgresMigrations returns the PostgreSQL schema. Tables are created in the
// first schema of the connection's search_path.
func postgresMigrations() []migration {
	return []migration{
		{version: 1, stmts: []string{
			`CREATE TABLE sessions (
			id               text        PRIMARY KEY,
			provider         text        NOT NULL DEFAULT '',
			model_id         text        NOT NULL DEFAULT '',
			workspace        text        NOT NULL DEFAULT '',
			agent_state      text        NOT NULL DEFAULT '',
			approval_mode    integer     NOT NULL DEFAULT 0,
			thinking_level   integer     NOT NULL DEFAULT 0,
			title            text        NOT NULL DEFAULT '',
			parent_id        text        NOT NULL DEFAULT '',
			source           text        NOT NULL DEFAULT '',
			environment_id   text        NOT NULL DEFAULT '',
			environment_addr text        NOT NULL DEFAULT '',
			config           bytea,
			usage_cache_read  bigint     NOT NULL DEFAULT 0,
			usage_cache_write bigint     NOT NULL DEFAULT 0,
			usage_output      bigint     NOT NULL DEFAULT 0,
			usage_total       bigint     NOT NULL DEFAULT 0,
			created_at       timestamptz NOT NULL,
			updated_at       timestamptz NOT NULL,
			last_sequence    bigint      NOT NULL DEFAULT 0
		)`,
			`CREATE INDEX sessions_newest ON sessions (created_at DESC, id DESC)`,
			`CREATE INDEX sessions_parent ON sessions (parent_id) WHERE parent_id <> ''`,
			`CREATE TABLE events (
			session_id  text        NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
			seq         bigint      NOT NULL,
			kind        text        NOT NULL,
			payload     bytea       NOT NULL,
			appended_at timestamptz NOT NULL DEFAULT now(),
			PRIMARY KEY (session_id, seq)
		)`,
			`CREATE TABLE torn_events (
			session_id     text        NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
			seq            bigint      NOT NULL,
			kind           text        NOT NULL,
			payload        bytea       NOT NULL,
			quarantined_at timestamptz NOT NULL DEFAULT now(),
			PRIMARY KEY (session_id, seq)
		)`,
			`CREATE TABLE leases (
			session_id text        PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
			owner      text        NOT NULL,
			owner_addr text        NOT NULL DEFAULT '',
			expires_at timestamptz NOT NULL
		)`,
		}},
		// As SQLite's version 2.
		{version: 2, stmts: []string{
			`ALTER TABLE sessions ADD COLUMN usage_reasoning bigint NOT NULL DEFAULT 0`,
			`ALTER TABLE sessions ADD COLUMN usage_cost_usd double precision`,
			`ALTER TABLE sessions ADD COLUMN usage_unreported boolean NOT NULL DEFAULT false`,
		}},
		// As SQLite's version 3.
		{version: 3, stmts: []string{
			`CREATE TABLE agents (
			project    text        NOT NULL,
			name       text        NOT NULL,
			version    bigint      NOT NULL,
			updated_at timestamptz NOT NULL DEFAULT now(),
			PRIMARY KEY (project, name)
		)`,
			`CREATE TABLE agent_files (
			project text   NOT NULL,
			agent   text   NOT NULL,
			path    text   NOT NULL,
			data    bytea  NOT NULL,
			version bigint NOT NULL,
			PRIMARY KEY (project, agent, path),
			FOREIGN KEY (project, agent) REFERENCES agents (project, name) ON DELETE CASCADE ON UPDATE CASCADE
		)`,
		}},
		// As SQLite's version 4.
		{version: 4, stmts: teamsMigration("bigserial PRIMARY KEY", "bytea",
			`(extract(epoch FROM now()) * 1000000)::bigint`)},
		// As SQLite's version 5.
		{version: 5, stmts: schedulesMigration("bytea")},
		// As SQLite's version 6.
		{version: 6, stmts: signInStatesMigration("bytea")},
		// As SQLite's version 7.
		{version: 7, stmts: []string{signInLoopbackMigration}},
		// As SQLite's version 8.
		{version: 8, stmts: modelSettingsMigration()},
		// As SQLite's version 9.
		{version: 9, stmts: sharedPayloadsMigration("bytea", "")},
	}
}

// sharedPayloadsMigration keeps the large parts of events once per
// project (payloads.go), in a dialect whose byte-string type is bytes and
// whose tables of few, wide rows want options after their definition.
//
// The events' payload column becomes body, which an event row refers to
// a shared part beside. The rename is what keeps a replica older than
// this version from misreading a row a newer one wrote: its statements
// name payload, so once the schema is at version 9 they fail (reads,
// appends and the quarantine of a torn record alike) instead of
// returning a body without its shared part, which would decode as an
// event with no tools or no system prompt, or be quarantined as torn.
// A replica that starts later refuses the schema as newer than it knows.
// See docs/decisions.md, "Large event parts kept once".
func sharedPayloadsMigration(bytes, tableOptions string) []string {
	return []string{
		`ALTER TABLE events RENAME COLUMN payload TO body`,
		`ALTER TABLE events ADD COLUMN shared ` + bytes,
		`CREATE INDEX events_shared ON events (shared) WHERE shared IS NOT NULL`,
		`ALTER TABLE torn_events ADD COLUMN shared ` + bytes,
		`CREATE TABLE shared_payloads (
			digest     ` + bytes + ` PRIMARY KEY,
			project_id TEXT NOT NULL,
			body       ` + bytes + ` NOT NULL
		)` + tableOptions,
		`CREATE INDEX shared_payloads_project ON shared_payloads (project_id)`,
	}
}

// teamsMigration is the ownership model's schema step in a dialect: serial
// is its auto-increment key, bytes its byte-string type and now its current
// time in microseconds. Everything else is the same text in both.
func teamsMigration(serial, bytes, now string) []string {
	return []string{
		`ALTER TABLE sessions ADD COLUMN project_id TEXT NOT NULL DEFAULT '` + DefaultProject + `'`,
		`CREATE INDEX sessions_project ON sessions (project_id, created_at DESC, id DESC)`,
		`CREATE TABLE users (
			id                   TEXT    PRIMARY KEY,
			name                 TEXT    NOT NULL DEFAULT '',
			email                TEXT    NOT NULL DEFAULT '',
			password_hash        TEXT    NOT NULL DEFAULT '',
			admin                INTEGER NOT NULL DEFAULT 0,
			disabled             INTEGER NOT NULL DEFAULT 0,
			oidc_subject         TEXT    NOT NULL DEFAULT '',
			failed_sign_ins      INTEGER NOT NULL DEFAULT 0,
			locked_until         BIGINT  NOT NULL DEFAULT 0,
			password_changed_at  BIGINT  NOT NULL DEFAULT 0,
			created_at           BIGINT  NOT NULL
		)`,
		`CREATE UNIQUE INDEX users_oidc_subject ON users (oidc_subject) WHERE oidc_subject <> ''`,
		`CREATE TABLE projects (
			id         TEXT   PRIMARY KEY,
			name       TEXT   NOT NULL DEFAULT '',
			created_at BIGINT NOT NULL
		)`,
		`CREATE TABLE memberships (
			project_id TEXT   NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
			user_id    TEXT   NOT NULL REFERENCES users (id) ON DELETE CASCADE,
			role       TEXT   NOT NULL,
			created_at BIGINT NOT NULL,
			PRIMARY KEY (project_id, user_id)
		)`,
		`CREATE INDEX memberships_user ON memberships (user_id)`,
		`CREATE TABLE access_tokens (
			id           TEXT   PRIMARY KEY,
			user_id      TEXT   NOT NULL REFERENCES users (id) ON DELETE CASCADE,
			name         TEXT   NOT NULL DEFAULT '',
			digest       ` + bytes + ` NOT NULL UNIQUE,
			scope        TEXT   NOT NULL,
			created_at   BIGINT NOT NULL,
			expires_at   BIGINT NOT NULL DEFAULT 0,
			last_used_at BIGINT NOT NULL DEFAULT 0
		)`,
		`CREATE INDEX access_tokens_user ON access_tokens (user_id)`,
		`CREATE TABLE login_sessions (
			digest     ` + bytes + ` PRIMARY KEY,
			user_id    TEXT   NOT NULL REFERENCES users (id) ON DELETE CASCADE,
			created_at BIGINT NOT NULL,
			expires_at BIGINT NOT NULL
		)`,
		`CREATE INDEX login_sessions_user ON login_sessions (user_id)`,
		`CREATE TABLE audit_log (
			id         ` + serial + `,
			at         BIGINT NOT NULL,
			actor      TEXT   NOT NULL,
			project_id TEXT   NOT NULL DEFAULT '',
			action     TEXT   NOT NULL,
			target     TEXT   NOT NULL DEFAULT '',
			detail     TEXT   NOT NULL DEFAULT ''
		)`,
		`CREATE INDEX audit_log_project ON audit_log (project_id, id DESC)`,
		`INSERT INTO users (id, name, admin, created_at) VALUES ('` + AdminUser + `', 'Administrator', 1, ` + now + `)`,
		`INSERT INTO projects (id, name, created_at) VALUES ('` + DefaultProject + `', 'Default', ` + now + `)`,
		`INSERT INTO memberships (project_id, user_id, role, created_at) VALUES ('` + DefaultProject + `', '` + AdminUser + `', 'owner', ` + now + `)`,
	}
}

// schedulesMigration is the schedules' schema step in a dialect whose
// byte-string type is bytes. Times are microseconds since the Unix epoch,
// as in the ownership model's tables, so one implementation
// (schedulesql.go) serves both dialects.
func schedulesMigration(bytes string) []string {
	return []string{
		`CREATE TABLE schedules (
			id         TEXT    PRIMARY KEY,
			project    TEXT    NOT NULL,
			agent      TEXT    NOT NULL,
			name       TEXT    NOT NULL,
			definition ` + bytes + ` NOT NULL,
			version    BIGINT  NOT NULL,
			enabled    INTEGER NOT NULL DEFAULT 0,
			next_due   BIGINT  NOT NULL DEFAULT 0,
			updated_at BIGINT  NOT NULL,
			UNIQUE (project, agent, name)
		)`,
		`CREATE INDEX schedules_due ON schedules (next_due) WHERE enabled = 1 AND next_due > 0`,
		`CREATE TABLE schedule_runs (
			id          TEXT   PRIMARY KEY,
			schedule_id TEXT   NOT NULL,
			project     TEXT   NOT NULL,
			agent       TEXT   NOT NULL,
			name        TEXT   NOT NULL,
			due_at      BIGINT NOT NULL,
			state       TEXT   NOT NULL,
			reason      TEXT   NOT NULL DEFAULT '',
			session_id  TEXT   NOT NULL DEFAULT '',
			since_seq   BIGINT NOT NULL DEFAULT 0,
			owner       TEXT   NOT NULL DEFAULT '',
			owner_until BIGINT NOT NULL DEFAULT 0,
			created_at  BIGINT NOT NULL,
			updated_at  BIGINT NOT NULL,
			UNIQUE (schedule_id, due_at)
		)`,
		`CREATE INDEX schedule_runs_pending ON schedule_runs (due_at) WHERE state = 'pending'`,
		`CREATE INDEX schedule_runs_schedule ON schedule_runs (project, agent, name, due_at DESC)`,
	}
}

// signInLoopbackMigration adds where a command-line client that started
// a sign-in listens, in both dialects.
const signInLoopbackMigration = `ALTER TABLE sign_in_states ADD COLUMN loopback TEXT NOT NULL DEFAULT ''`

// signInStatesMigration is the table of sign-ins with an identity
// provider under way, in a dialect whose byte-string type is bytes.
func signInStatesMigration(bytes string) []string {
	return []string{
		`CREATE TABLE sign_in_states (
			state_digest   ` + bytes + ` PRIMARY KEY,
			binding_digest ` + bytes + ` NOT NULL,
			nonce          TEXT   NOT NULL,
			verifier       TEXT   NOT NULL,
			expires_at     BIGINT NOT NULL
		)`,
	}
}
