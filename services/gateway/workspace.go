package gateway

import (
	"net/http"
	"strconv"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// workspaceRoutes are the session's workspace: its files and what its
// turns changed, with undo and redo.
func (g *Gateway) workspaceRoutes(api func(string, http.HandlerFunc)) {
	api("GET /api/sessions/{id}/changes", g.changes)
	api("GET /api/sessions/{id}/changes/{seq}", g.changeDiff)
	api("POST /api/sessions/{id}/changes/{seq}/undo", g.undoChange(false))
	api("POST /api/sessions/{id}/changes/{seq}/redo", g.undoChange(true))
	api("GET /api/sessions/{id}/files", g.files)
	api("GET /api/sessions/{id}/file", g.file)
}

// sequence reads the {seq} of a change's route. What is not a number
// goes to the engine as -1, which it refuses as invalid once it has
// checked the caller may see the session: a malformed path tells a
// stranger nothing about whether the session exists.
func sequence(r *http.Request) int64 {
	seq, err := strconv.ParseInt(r.PathValue("seq"), 10, 64)
	if err != nil || seq < 0 {
		return -1
	}
	return seq
}

func (g *Gateway) changes(w http.ResponseWriter, r *http.Request) {
	resp, err := g.engine.ListWorkspaceChanges(r.Context(), &penguinv1.ListWorkspaceChangesRequest{SessionId: r.PathValue("id")})
	if err != nil {
		g.fail(w, r, err)
		return
	}
	writeProto(w, http.StatusOK, resp)
}

func (g *Gateway) changeDiff(w http.ResponseWriter, r *http.Request) {
	size, err := queryInt32(r, "page_size")
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	resp, err := g.engine.GetWorkspaceDiff(r.Context(), &penguinv1.GetWorkspaceDiffRequest{
		SessionId: r.PathValue("id"), Sequence: sequence(r), PageSize: size, PageToken: r.URL.Query().Get("page_token"),
	})
	if err != nil {
		g.fail(w, r, err)
		return
	}
	writeProto(w, http.StatusOK, resp)
}

// undoChange undoes, or redoes, a change; the body may set force.
func (g *Gateway) undoChange(redo bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		req := &penguinv1.UndoWorkspaceChangeRequest{}
		if err := readProto(r, req); err != nil {
			badRequest(w, err.Error())
			return
		}
		req.SessionId, req.Sequence, req.Redo = r.PathValue("id"), sequence(r), redo
		resp, err := g.engine.UndoWorkspaceChange(r.Context(), req)
		if err != nil {
			g.fail(w, r, err)
			return
		}
		writeProto(w, http.StatusOK, resp)
	}
}

func (g *Gateway) files(w http.ResponseWriter, r *http.Request) {
	resp, err := g.engine.ListSessionFiles(r.Context(), &penguinv1.ListSessionFilesRequest{SessionId: r.PathValue("id"), Dir: r.URL.Query().Get("dir")})
	if err != nil {
		g.fail(w, r, err)
		return
	}
	writeProto(w, http.StatusOK, resp)
}

func (g *Gateway) file(w http.ResponseWriter, r *http.Request) {
	resp, err := g.engine.GetSessionFile(r.Context(), &penguinv1.GetSessionFileRequest{SessionId: r.PathValue("id"), Path: r.URL.Query().Get("path")})
	if err != nil {
		g.fail(w, r, err)
		return
	}
	writeProto(w, http.StatusOK, resp.GetFile())
}
