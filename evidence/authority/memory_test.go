package authority_test

import (
	"testing"

	"github.com/agentproto/handoff/evidence/authority"
	"github.com/agentproto/handoff/evidence/authority/authoritytest"
)

func TestMemory(t *testing.T) {
	authoritytest.Run(t, func(t *testing.T) authority.Ledger { return authority.NewMemory() }, authoritytest.Options{})
}
