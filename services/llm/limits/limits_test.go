package limits_test

import (
	"errors"
	"strings"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/llm/limits"
)

func TestTokens(t *testing.T) {
	if got := limits.Tokens("abcdefgh"); got != 2 {
		t.Errorf("ascii = %d", got)
	}
	if got := limits.Tokens("你好世界"); got != 4 {
		t.Errorf("cjk = %d", got)
	}
	msgs := []*penguinv1.OmniMessage{omni.UserText(strings.Repeat("a", 400)), omni.ImageURL("https://x/y.png")}
	if got := limits.Input("", nil, msgs); got < 100+1600 {
		t.Errorf("input = %d", got)
	}
}

func TestOutputCap(t *testing.T) {
	for _, tc := range []struct {
		want, window, input int64
		capTokens, room     int64
	}{
		{want: 1000, window: 0, input: 50, capTokens: 1000, room: 0},          // unknown window: no clamp
		{want: 1000, window: 2000, input: 50, capTokens: 1000, room: 0},       // implausible window: no clamp
		{want: 8000, window: 10000, input: 2000, capTokens: 6976, room: 6976}, // clamped by the room
		{want: 100, window: 10000, input: 2000, capTokens: 100, room: 6976},   // the caller's cap wins
		{want: 0, window: 10000, input: 2000, capTokens: 0, room: 6976},       // provider default kept
		{want: 0, window: 1000000, input: 0, capTokens: 0, room: 980000},      // 2% margin
	} {
		c, r, err := limits.OutputCap(tc.want, tc.window, tc.input)
		if err != nil || c != tc.capTokens || r != tc.room {
			t.Errorf("OutputCap(%d, %d, %d) = %d, %d, %v; want %d, %d", tc.want, tc.window, tc.input, c, r, err, tc.capTokens, tc.room)
		}
	}
	_, _, err := limits.OutputCap(1000, 8192, 7000)
	var tooLarge *limits.TooLargeError
	if !errors.As(err, &tooLarge) || !strings.Contains(err.Error(), "window of 8192") {
		t.Errorf("err = %v", err)
	}
}
