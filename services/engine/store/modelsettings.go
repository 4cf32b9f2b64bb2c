package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// ModelSettingsStore keeps a project's settings of models that the
// gateway's catalog lacks or that the project runs otherwise (a local
// model's context window and price). One implementation (teamSQL) serves
// both dialects.
type ModelSettingsStore interface {
	// ListModelSettings returns a project's settings, by provider, then
	// model id.
	ListModelSettings(ctx context.Context, project string) ([]*ModelSetting, error)
	// GetModelSetting returns one model's settings in a project, or
	// ErrNotFound.
	GetModelSetting(ctx context.Context, project, provider, modelID string) (*ModelSetting, error)
	// PutModelSetting stores s, replacing the model's settings.
	PutModelSetting(ctx context.Context, s *ModelSetting) error
	// DeleteModelSetting removes a model's settings; ErrNotFound when it
	// has none.
	DeleteModelSetting(ctx context.Context, project, provider, modelID string) error
}

// ModelSetting is one model's settings in a project.
type ModelSetting struct {
	Project, Provider, ModelID string
	// ContextWindow is the window in tokens; zero keeps the catalog's.
	ContextWindow int64
	// Price is the price in USD per million tokens; nil keeps the
	// catalog's.
	Price     *Price
	UpdatedAt time.Time
}

// Price is a model's price in USD per million tokens; a nil cache price
// is the input price.
type Price struct {
	Input      float64  `json:"input"`
	Output     float64  `json:"output"`
	CacheRead  *float64 `json:"cache_read,omitempty"`
	CacheWrite *float64 `json:"cache_write,omitempty"`
}

// modelSettingsMigration is the table of ModelSettingsStore, the same text
// in both dialects (the price is JSON text, empty for none).
func modelSettingsMigration() []string {
	return []string{
		`CREATE TABLE model_settings (
			project_id     TEXT   NOT NULL,
			provider       TEXT   NOT NULL,
			model_id       TEXT   NOT NULL,
			context_window BIGINT NOT NULL DEFAULT 0,
			price          TEXT   NOT NULL DEFAULT '',
			updated_at     BIGINT NOT NULL,
			PRIMARY KEY (project_id, provider, model_id)
		)`,
	}
}

const modelSettingColumns = `project_id, provider, model_id, context_window, price, updated_at`

func scanModelSetting(sc scanner) (*ModelSetting, error) {
	var (
		s       ModelSetting
		price   string
		updated int64
	)
	if err := sc.Scan(&s.Project, &s.Provider, &s.ModelID, &s.ContextWindow, &price, &updated); err != nil {
		return nil, err
	}
	return s.stored(price, updated)
}

// stored completes s, read with its price and time of change as the
// table holds them.
func (s ModelSetting) stored(price string, updated int64) (*ModelSetting, error) {
	if price != "" {
		s.Price = &Price{}
		if err := json.Unmarshal([]byte(price), s.Price); err != nil {
			return nil, fmt.Errorf("the price of %s/%s: %w", s.Provider, s.ModelID, err)
		}
	}
	s.UpdatedAt = fromMicros(updated)
	return &s, nil
}

// ListModelSettings implements ModelSettingsStore.
func (t *teamSQL) ListModelSettings(ctx context.Context, project string) ([]*ModelSetting, error) {
	return list(ctx, t, "list model settings", scanModelSetting,
		`SELECT `+modelSettingColumns+` FROM model_settings WHERE project_id = ? ORDER BY provider, model_id`, project)
}

// GetModelSetting implements ModelSettingsStore.
func (t *teamSQL) GetModelSetting(ctx context.Context, project, provider, modelID string) (*ModelSetting, error) {
	var s *ModelSetting
	err := t.get(ctx, "get model setting", "no settings for "+provider+"/"+modelID, func(sc scanner) error {
		var err error
		s, err = scanModelSetting(sc)
		return err
	}, getModelSetting, project, provider, modelID)
	return s, err
}

// getModelSetting reads one model's settings in a project (GetModelSetting,
// and SQLite's PeekLease; PostgreSQL's joins the table in pgPeekLease).
const getModelSetting = `SELECT ` + modelSettingColumns + ` FROM model_settings WHERE project_id = ? AND provider = ? AND model_id = ?`

// PutModelSetting implements ModelSettingsStore.
func (t *teamSQL) PutModelSetting(ctx context.Context, s *ModelSetting) error {
	const op = "put model setting"
	if s == nil || s.Project == "" || s.Provider == "" || s.ModelID == "" {
		return fmt.Errorf("%s: %w: a project, a provider and a model id are required", op, ErrInvalid)
	}
	if err := t.begin(op); err != nil {
		return err
	}
	price := ""
	if s.Price != nil {
		b, err := json.Marshal(s.Price)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		price = string(b)
	}
	if s.UpdatedAt.IsZero() {
		s.UpdatedAt = time.Now()
	}
	if _, err := t.exec(ctx, `INSERT INTO model_settings (`+modelSettingColumns+`) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (project_id, provider, model_id) DO UPDATE SET context_window = excluded.context_window, price = excluded.price, updated_at = excluded.updated_at`,
		s.Project, s.Provider, s.ModelID, s.ContextWindow, price, micros(s.UpdatedAt)); err != nil {
		return t.classify(ctx, op, err)
	}
	return nil
}

// DeleteModelSetting implements ModelSettingsStore.
func (t *teamSQL) DeleteModelSetting(ctx context.Context, project, provider, modelID string) error {
	return t.one(ctx, "delete model setting", "no settings for "+provider+"/"+modelID,
		`DELETE FROM model_settings WHERE project_id = ? AND provider = ? AND model_id = ?`, project, provider, modelID)
}
