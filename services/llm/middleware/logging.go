package middleware

import (
	"context"
	"log/slog"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/logger"
	"github.com/penguin-agent/penguin/services/llm/stream"
	"github.com/penguin-agent/penguin/services/llm/translate"
)

// Logging logs one line per model call when it ends: who was called, how it
// ended and what it cost. It logs shapes (message and tool counts, token
// counts) and never content: no prompt, no answer, no credential. Failures
// log at Warn (they are what an operator looks for), everything else at
// Info. A failure's message is logged as "error"; a completed call's
// message, when it has one, is a note such as that the output stopped at
// the token limit, logged as "note" so that a run of answers cut short
// shows in the logs without reading as failures. A nil log discards the
// lines.
func Logging(log *slog.Logger) stream.Middleware {
	log = logger.OrDiscard(log)
	return func(next stream.Streamer) stream.Streamer {
		return stream.StreamerFunc(func(ctx context.Context, req *stream.Request, emit stream.Emit) *penguinv1.LLMOutcome {
			if !log.Enabled(ctx, slog.LevelWarn) {
				// Neither line would be written, whatever the outcome.
				return next.Stream(ctx, req, emit)
			}
			o := &observation{start: time.Now()}
			if log.Enabled(ctx, slog.LevelDebug) {
				// Asked first: the attributes of a line the level drops
				// were built (and boxed) at every call.
				log.LogAttrs(ctx, slog.LevelDebug, "llm request",
					slog.String("provider", req.Provider), slog.String("model", req.Model),
					slog.Int("messages", len(req.Messages)), slog.Int("tools", len(req.Tools)),
					slog.String("thinking", translate.LevelName(req.Thinking)),
					slog.Int64("max_tokens", req.MaxTokens), slog.Int64("input_estimate", req.InputEstimate))
			}
			out := next.Stream(ctx, req, observe(emit, o))
			level := slog.LevelInfo
			if s := out.GetStatus(); s != penguinv1.StopReason_STOP_REASON_COMPLETED && s != penguinv1.StopReason_STOP_REASON_ABORTED {
				level = slog.LevelWarn
			}
			if !log.Enabled(ctx, level) {
				return out
			}
			// Room for every attribute below, so that the list is not
			// grown as it is built.
			var room [16]slog.Attr
			attrs := append(room[:0],
				slog.String("provider", req.Provider), slog.String("model", req.Model),
				slog.String("status", statusName(out.GetStatus())),
				slog.Duration("duration", time.Since(o.start)),
				slog.Duration("first_frame", o.firstFrame),
				slog.Int("frames", o.frames),
			)
			if u := o.usage; u != nil {
				attrs = append(attrs, slog.Int64("tokens_total", u.total), slog.Int64("tokens_output", u.output),
					slog.Int64("tokens_cache_read", u.cacheRead), slog.Int64("tokens_cache_write", u.cacheWrite))
			}
			if out.GetStatus() == penguinv1.StopReason_STOP_REASON_COMPLETED {
				if note := out.GetMessage(); note != "" {
					attrs = append(attrs, slog.String("note", note))
				}
			} else {
				attrs = append(attrs, slog.String("code", codeName(out.GetCode())), slog.String("error", out.GetMessage()),
					slog.Bool("permanent", out.GetPermanent()))
				if out.GetHttpStatus() != 0 {
					attrs = append(attrs, slog.Int("http_status", int(out.GetHttpStatus())))
				}
				if out.GetRetryAfterMs() != 0 {
					attrs = append(attrs, slog.Int64("retry_after_ms", out.GetRetryAfterMs()))
				}
			}
			if id := out.GetProviderRequestId(); id != "" {
				attrs = append(attrs, slog.String("provider_request_id", id))
			}
			log.LogAttrs(ctx, level, "llm request ended", attrs...)
			return out
		})
	}
}
