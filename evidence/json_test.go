package evidence

import (
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/stretchr/testify/require"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func jsonMarshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v, json.Deterministic(true))
	require.NoError(t, err)
	return b
}
