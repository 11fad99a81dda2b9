package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	_ "github.com/jackc/pgx/v5/stdlib" // the database/sql driver "pgx", for replay/pgstore
	"github.com/redis/go-redis/v9"

	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/replay/boltstore"
	"github.com/agentproto/handoff/replay/pgstore"
	"github.com/agentproto/handoff/replay/redisstore"
)

// stores are an agent's memory of the hops it received (replay.Store) and
// of the hops it offered (replay.OfferStore), as --store names them.
type stores struct {
	hops    replay.Store
	offers  replay.OfferStore
	durable bool // they survive a restart of this process
	close   func() error
}

// storeUsage describes the --store flag.
const storeUsage = "where the agent keeps its hops, the ones it received and the ones it offered (`STORE`): memory (lost at exit), " +
	"a bbolt file (created when missing), redis://HOST:PORT/DB (or rediss://), or postgres://... (a PostgreSQL DSN); " +
	"a durable store lets a restarted gateway answer a hop it took before and never take it twice"

// The kinds of store --store names.
const (
	storeMemory   = "memory"
	storeBolt     = "bolt"
	storeRedis    = "redis"
	storePostgres = "postgres"
)

// storeKind returns the kind of store spec names: a URL's scheme, else a
// bbolt file.
func storeKind(spec string) string {
	switch {
	case spec == "" || spec == "memory":
		return storeMemory
	case strings.HasPrefix(spec, "redis://") || strings.HasPrefix(spec, "rediss://"):
		return storeRedis
	case strings.HasPrefix(spec, "postgres://") || strings.HasPrefix(spec, "postgresql://"):
		return storePostgres
	}
	return storeBolt
}

// openStores opens the stores spec names.
func openStores(ctx context.Context, spec string) (*stores, error) {
	switch storeKind(spec) {
	case storeMemory:
		return &stores{hops: replay.NewMemory(replay.MemoryOptions{}), offers: replay.NewMemoryOffers(replay.MemoryOffersOptions{}),
			close: func() error { return nil }}, nil
	case storeRedis:
		opts, err := redis.ParseURL(spec)
		if err != nil {
			return nil, fmt.Errorf("--store %s: %v", spec, err)
		}
		client := redis.NewClient(opts)
		if err := client.Ping(ctx).Err(); err != nil {
			client.Close()
			return nil, fmt.Errorf("--store %s: %v", spec, err)
		}
		return &stores{hops: redisstore.New(client, redisstore.Options{}), offers: redisstore.NewOffers(client, redisstore.Options{}),
			durable: true, close: client.Close}, nil
	case storePostgres:
		db, err := sql.Open("pgx", spec)
		if err != nil {
			return nil, fmt.Errorf("--store: %v", err)
		}
		hops, err := pgstore.Open(ctx, db, pgstore.Options{})
		if err != nil {
			db.Close()
			return nil, fmt.Errorf("--store: %v", err)
		}
		offers, err := pgstore.OpenOffers(ctx, db, pgstore.Options{})
		if err != nil {
			hops.Close()
			db.Close()
			return nil, fmt.Errorf("--store: %v", err)
		}
		return &stores{hops: hops, offers: offers, durable: true,
			close: func() error { return errors.Join(offers.Close(), hops.Close(), db.Close()) }}, nil
	}
	hops, err := boltstore.Open(spec, boltstore.Options{})
	if err != nil {
		return nil, fmt.Errorf("--store: %v", err)
	}
	offers, err := hops.Offers()
	if err != nil {
		hops.Close()
		return nil, fmt.Errorf("--store: %v", err)
	}
	return &stores{hops: hops, offers: offers, durable: true, close: hops.Close}, nil
}
