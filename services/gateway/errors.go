package gateway

import (
	"encoding/json"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// errorBody is the JSON shape of every error response and of the SSE
// "error" event. Code is always a gRPC code name in snake_case (see
// codeName), whether the gateway or the engine refused the request, so a
// client matches on one vocabulary.
type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// codeNames spells every gRPC code in snake_case, the one spelling of
// error codes on the HTTP side. A table rather than a conversion of
// codes.Code.String(), whose "OK" and camel case do not convert cleanly.
var codeNames = map[codes.Code]string{
	codes.OK:                 "ok",
	codes.Canceled:           "cancelled",
	codes.Unknown:            "unknown",
	codes.InvalidArgument:    "invalid_argument",
	codes.DeadlineExceeded:   "deadline_exceeded",
	codes.NotFound:           "not_found",
	codes.AlreadyExists:      "already_exists",
	codes.PermissionDenied:   "permission_denied",
	codes.ResourceExhausted:  "resource_exhausted",
	codes.FailedPrecondition: "failed_precondition",
	codes.Aborted:            "aborted",
	codes.OutOfRange:         "out_of_range",
	codes.Unimplemented:      "unimplemented",
	codes.Internal:           "internal",
	codes.Unavailable:        "unavailable",
	codes.DataLoss:           "data_loss",
	codes.Unauthenticated:    "unauthenticated",
}

// codeName returns c's snake_case name.
func codeName(c codes.Code) string {
	if n, ok := codeNames[c]; ok {
		return n
	}
	return "unknown"
}

// httpStatusOf maps a gRPC status code to the HTTP status a REST client
// expects; codes not listed are 500.
var httpStatusOf = map[codes.Code]int{
	codes.InvalidArgument:    http.StatusBadRequest,
	codes.OutOfRange:         http.StatusBadRequest,
	codes.NotFound:           http.StatusNotFound,
	codes.AlreadyExists:      http.StatusConflict,
	codes.Aborted:            http.StatusConflict,
	codes.FailedPrecondition: http.StatusConflict,
	codes.ResourceExhausted:  http.StatusTooManyRequests,
	codes.Unauthenticated:    http.StatusUnauthorized,
	codes.PermissionDenied:   http.StatusForbidden,
	codes.Unimplemented:      http.StatusNotImplemented,
	codes.Unavailable:        http.StatusServiceUnavailable,
	codes.DeadlineExceeded:   http.StatusGatewayTimeout,
	codes.Canceled:           499,
}

// writeError writes an error response with the HTTP status that goes with
// code.
func writeError(w http.ResponseWriter, code codes.Code, message string) {
	httpStatus, ok := httpStatusOf[code]
	if !ok {
		httpStatus = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(httpStatus)
	_ = json.NewEncoder(w).Encode(errorBody{Error: codeName(code), Message: message})
}

// badRequest refuses a malformed request.
func badRequest(w http.ResponseWriter, message string) {
	writeError(w, codes.InvalidArgument, message)
}

// fail writes a failed engine call as an HTTP error, keeping the engine's
// message: it was written for clients.
func (g *Gateway) fail(w http.ResponseWriter, r *http.Request, err error) {
	st := status.Convert(err)
	g.opts.Logger.Info("gateway call failed", "method", r.Method, "path", r.URL.Path, "code", codeName(st.Code()))
	writeError(w, st.Code(), st.Message())
}
