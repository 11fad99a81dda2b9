// Package replicas holds the tests of several replicas of one agent sharing
// one memory of hops, on Redis (replay/redisstore), on one PostgreSQL table
// (replay/pgstore) and on one bbolt file (replay/boltstore), and the
// multi-process restart test: three agents, each killed with SIGKILL
// between the steps of a three-hop flow, that come back on their bbolt
// files and finish it (retransmit, answer, cancel, resolve; HC-42 holding
// across the restarts). It is a module of its own so that no backend enters
// the root module's requirements; it has no API.
package replicas
