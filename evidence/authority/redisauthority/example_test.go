package redisauthority_test

import (
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/agentproto/handoff/evidence/authority"
	"github.com/agentproto/handoff/evidence/authority/redisauthority"
)

// The authority ledger shared by every replica of a delegate: each opens
// the same ledger on the same Redis (persistent, maxmemory-policy
// noeviction) and gives it to every hop's guard, as
// evidence.HostConfig{Guard: evidence.GuardConfig{Ledger: ledger}} in its
// host's ServerConfig.Evidence (a2a1hop, a2a03hop, mcphop), so that an
// effect one replica performed is refused by all, and an approval is
// spent once.
func Example() {
	client := redis.NewClient(&redis.Options{Addr: "redis.internal:6379"})
	defer client.Close()
	ledger, err := redisauthority.New(client, redisauthority.Options{Prefix: "payments-authority"})
	if err != nil {
		log.Fatal(err)
	}
	var _ authority.Ledger = ledger
}
