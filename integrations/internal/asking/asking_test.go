package asking

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBackoff_HC37(t *testing.T) {
	iat := time.Unix(1000, 0)
	got := Backoff(iat, 2*time.Minute, 3)
	require.Len(t, got, 3)
	assert.True(t, got[0].Before(iat.Add(2*time.Minute)), "first retransmission before exp")
	assert.Equal(t, time.Minute, got[0].Sub(iat))
	assert.Equal(t, 2*time.Minute, got[1].Sub(got[0]))
	assert.Equal(t, 4*time.Minute, got[2].Sub(got[1]))
}
