package transcript

import (
	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// The workspace_change event (a turn's change of the workspace, or an
// undo or redo of one), in the trace format's event_msg family.

type fileChangeJSON struct {
	Path         string `json:"path"`
	Kind         string `json:"kind"`
	AddedLines   int32  `json:"added_lines,omitempty"`
	RemovedLines int32  `json:"removed_lines,omitempty"`
	Binary       bool   `json:"binary,omitempty"`
	TooLarge     bool   `json:"too_large,omitempty"`
	Link         bool   `json:"link,omitempty"`
}

type workspaceChangeJSON struct {
	Type         string           `json:"type"`
	Kind         string           `json:"kind"`
	Before       string           `json:"before"`
	After        string           `json:"after"`
	Files        []fileChangeJSON `json:"files"`
	TurnSequence int64            `json:"turn_sequence,omitempty"`
	Incomplete   string           `json:"incomplete,omitempty"`
	Forced       bool             `json:"forced,omitempty"`
}

func workspaceChangeKinds() enumNames[penguinv1.WorkspaceChangeKind] {
	return enumNames[penguinv1.WorkspaceChangeKind]{what: "workspace change kind"}
}

func fileChangeKinds() enumNames[penguinv1.FileChangeKind] {
	return enumNames[penguinv1.FileChangeKind]{what: "file change kind"}
}

// workspaceEvent encodes a workspace_change; ok is false for any other
// payload.
func (e *encoder) workspaceEvent(m *penguinv1.OmniMessage) (any, bool) {
	x := m.GetWorkspaceChange()
	if x == nil {
		return nil, false
	}
	files := make([]fileChangeJSON, 0, len(x.GetFiles()))
	for _, f := range x.GetFiles() {
		files = append(files, fileChangeJSON{
			Path: f.GetPath(), Kind: e.check(fileChangeKinds().required(f.GetKind())), AddedLines: f.GetAddedLines(),
			RemovedLines: f.GetRemovedLines(), Binary: f.GetBinary(), TooLarge: f.GetTooLarge(), Link: f.GetLink(),
		})
	}
	return workspaceChangeJSON{
		Type: "workspace_change", Kind: e.check(workspaceChangeKinds().required(x.GetKind())), Before: x.GetBefore(), After: x.GetAfter(),
		Files: files, TurnSequence: x.GetTurnSequence(), Incomplete: x.GetIncomplete(), Forced: x.GetForced(),
	}, true
}

// workspaceEvent decodes a workspace_change into m.
func (d *decoder) workspaceEvent(m *penguinv1.OmniMessage) error {
	var x workspaceChangeJSON
	if err := d.unmarshal(&x); err != nil {
		return err
	}
	kind, err := workspaceChangeKinds().requiredValue(x.Kind)
	d.check(err)
	c := &penguinv1.WorkspaceChange{Kind: kind, Before: x.Before, After: x.After, TurnSequence: x.TurnSequence, Incomplete: x.Incomplete, Forced: x.Forced}
	for _, f := range x.Files {
		fk, err := fileChangeKinds().requiredValue(f.Kind)
		d.check(err)
		c.Files = append(c.Files, &penguinv1.FileChange{
			Path: f.Path, Kind: fk, AddedLines: f.AddedLines, RemovedLines: f.RemovedLines, Binary: f.Binary, TooLarge: f.TooLarge, Link: f.Link,
		})
	}
	m.Payload = &penguinv1.OmniMessage_WorkspaceChange{WorkspaceChange: c}
	return nil
}
