package store

// A migration is one step of a database schema, applied once, in order, and
// recorded in the schema_migrations table. Migrations are append-only: a
// released step is never edited, a change is a new step.
type migration struct {
	version int
	stmts   []string
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
	}
}
