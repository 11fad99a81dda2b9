package main

import (
	"path/filepath"

	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/replay/boltstore"
)

// stores are an agent's two memories, kept under its own directory.
type stores struct {
	// Store is the delegate's memory of the hops it received (HC-33,
	// HC-34): a bbolt file, so that a hop taken before a crash is still
	// known after the restart and a retransmission is answered, never
	// processed again.
	Store replay.Store
	// Offers is the delegator's record of the hops it offered (HC-42,
	// HC-52), for Retransmit and Cancel after a restart too.
	Offers replay.OfferStore
}

// openStores opens the stores of the agent whose directory is dir: both in
// one bbolt file, hops.db, which survives a crash (every write is synced
// before it returns).
func openStores(dir string) (*stores, error) {
	st, err := boltstore.Open(filepath.Join(dir, "hops.db"), boltstore.Options{})
	if err != nil {
		return nil, err
	}
	offers, err := st.Offers()
	if err != nil {
		st.Close()
		return nil, err
	}
	return &stores{Store: st, Offers: offers}, nil
}

func (s *stores) Close() error {
	err := s.Offers.Close() // shares the Store's file: a no-op
	if e := s.Store.Close(); e != nil {
		err = e
	}
	return err
}
