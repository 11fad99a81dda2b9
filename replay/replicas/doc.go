// Package replicas holds the tests of several replicas of one agent sharing
// one memory of hops, on Redis (replay/redisstore) and on one bbolt file
// (replay/boltstore). It is a module of its own so that neither backend
// enters the root module's requirements; it has no API.
package replicas
