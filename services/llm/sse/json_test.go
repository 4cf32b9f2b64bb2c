package sse

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestDataDecoderMatchesUnmarshal decodes one event after another with one
// DataDecoder, valid and broken ones mixed, and checks every result and
// error against json.Unmarshal's: a broken event leaves nothing behind
// for the next.
func TestDataDecoderMatchesUnmarshal(t *testing.T) {
	type value struct {
		A string          `json:"a"`
		N *int            `json:"n"`
		L []string        `json:"l"`
		R json.RawMessage `json:"r"`
	}
	events := []string{
		`{"a":"x","n":1,"l":["p","q"],"r":{"k":[1,2]}}`,
		` {"a":"y"} ` + "\n",
		`{"a":"cut`,
		`{"a":"z"}`,
		`{"a":"x"} {"a":"second"}`,
		`{"a":"x"}}`,
		`{"a":"w"}`,
		``,
		`   `,
		`{"n":"not a number","a":"kept"}`,
		`{"a":"bad \xff utf8 \u00e9 \ud800"}`,
		`null`,
		`[1]`,
		`{"A":"case","unknown":{"deep":[null,true,1e3]}}`,
		`{"a":"x"}garbage`,
		`{"a":"last"}`,
	}
	var d DataDecoder
	for _, e := range events {
		var want, got value
		wantErr := json.Unmarshal([]byte(e), &want)
		gotErr := d.Decode([]byte(e), &got)
		if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
			t.Errorf("event %q: error %v, json.Unmarshal's %v", e, gotErr, wantErr)
		}
		if wantErr == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("event %q: %+v, json.Unmarshal's %+v", e, got, want)
		}
	}
}
