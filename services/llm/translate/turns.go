package translate

import (
	"encoding/base64"
	"fmt"
	"strings"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// Turn is a run of consecutive messages of one speaker: what the provider
// APIs call one message. An assistant turn holds thinking, text and tool
// calls; a user turn holds text, images and tool outputs.
type Turn struct {
	// Role is ROLE_USER or ROLE_ASSISTANT.
	Role penguinv1.Role
	// Messages are the turn's messages in order.
	Messages []*penguinv1.OmniMessage
}

// RoleOf returns the speaker of a complete model message: the role field
// where the payload has one that matters (text, inline data), else the
// payload's fixed speaker. It returns ROLE_UNSPECIFIED for anything else.
func RoleOf(m *penguinv1.OmniMessage) penguinv1.Role {
	switch p := m.GetPayload().(type) {
	case *penguinv1.OmniMessage_Text:
		if p.Text.GetRole() == penguinv1.Role_ROLE_ASSISTANT {
			return penguinv1.Role_ROLE_ASSISTANT
		}
		return penguinv1.Role_ROLE_USER
	case *penguinv1.OmniMessage_InlineData:
		if p.InlineData.GetRole() == penguinv1.Role_ROLE_ASSISTANT {
			return penguinv1.Role_ROLE_ASSISTANT
		}
		return penguinv1.Role_ROLE_USER
	case *penguinv1.OmniMessage_ImageUrl, *penguinv1.OmniMessage_ToolCallOutput:
		return penguinv1.Role_ROLE_USER
	case *penguinv1.OmniMessage_Thinking, *penguinv1.OmniMessage_InlineThinking, *penguinv1.OmniMessage_ToolCall:
		return penguinv1.Role_ROLE_ASSISTANT
	}
	return penguinv1.Role_ROLE_UNSPECIFIED
}

// Turns groups msgs into turns of consecutive messages with one speaker.
// Messages with no speaker (events) are skipped.
func Turns(msgs []*penguinv1.OmniMessage) []Turn {
	var out []Turn
	for _, m := range msgs {
		r := RoleOf(m)
		if r == penguinv1.Role_ROLE_UNSPECIFIED {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Role == r {
			out[n-1].Messages = append(out[n-1].Messages, m)
			continue
		}
		out = append(out, Turn{Role: r, Messages: []*penguinv1.OmniMessage{m}})
	}
	return out
}

// DataURL is an image split out of a data URL.
type DataURL struct {
	// MediaType is the MIME type, such as image/png.
	MediaType string
	// Data is the base64 payload as it was in the URL.
	Data string
}

// ParseDataURL splits a base64 data URL (data:<mime>;base64,<data>). ok is
// false for any other URL, such as an https one.
func ParseDataURL(u string) (DataURL, bool, error) {
	rest, found := strings.CutPrefix(u, "data:")
	if !found {
		return DataURL{}, false, nil
	}
	meta, data, found := strings.Cut(rest, ",")
	if !found {
		return DataURL{}, true, fmt.Errorf("data URL has no comma")
	}
	mime, isB64 := strings.CutSuffix(meta, ";base64")
	if !isB64 {
		return DataURL{}, true, fmt.Errorf("data URL is not base64 encoded")
	}
	if mime == "" {
		return DataURL{}, true, fmt.Errorf("data URL has no media type")
	}
	return DataURL{MediaType: mime, Data: data}, true, nil
}

// InlineText decodes a text/* inline_data payload.
func InlineText(d *penguinv1.InlineData) (string, error) {
	raw, err := base64.StdEncoding.DecodeString(d.GetData())
	if err != nil {
		return "", fmt.Errorf("inline_data is not valid base64: %w", err)
	}
	return string(raw), nil
}

// ImageOf returns the image URL a user message carries: an image_url, or an
// image/* inline_data turned into a data URL. ok is false for other
// messages.
func ImageOf(m *penguinv1.OmniMessage) (string, bool) {
	switch p := m.GetPayload().(type) {
	case *penguinv1.OmniMessage_ImageUrl:
		return p.ImageUrl.GetImageUrl(), true
	case *penguinv1.OmniMessage_InlineData:
		if strings.HasPrefix(p.InlineData.GetMimeType(), "image/") {
			return "data:" + p.InlineData.GetMimeType() + ";base64," + p.InlineData.GetData(), true
		}
	}
	return "", false
}
