module github.com/agentproto/handoff

go 1.26.0

require (
	github.com/fxamacker/cbor/v2 v2.10.0
	github.com/go-jose/go-jose/v4 v4.1.9
	github.com/go-json-experiment/json v1.27.2
	github.com/gowebpki/jcs v1.0.2
	github.com/stretchr/testify v1.12.1
	github.com/transparency-dev/merkle v0.0.2
	github.com/veraison/go-cose v1.3.0
	golang.org/x/text v0.44.0
)

require (
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)

// Every other module of the repository, by its directory: importers ignore
// these directives; in a workspace that uses this module (the repository's
// go.work, or "go work use -r" on a checkout) they make every module of the
// repository resolve to the checkout, whichever version a go.mod requires
// (./release.sh checks that the list is whole).
replace (
	github.com/agentproto/handoff/cmd/handoff => ./cmd/handoff
	github.com/agentproto/handoff/evidence/authority/boltauthority => ./evidence/authority/boltauthority
	github.com/agentproto/handoff/evidence/authority/pgauthority => ./evidence/authority/pgauthority
	github.com/agentproto/handoff/evidence/authority/redisauthority => ./evidence/authority/redisauthority
	github.com/agentproto/handoff/examples => ./examples
	github.com/agentproto/handoff/integrations => ./integrations
	github.com/agentproto/handoff/integrations/a2a1hop => ./integrations/a2a1hop
	github.com/agentproto/handoff/integrations/adkhop => ./integrations/adkhop
	github.com/agentproto/handoff/integrations/cmd/handoff-demo => ./integrations/cmd/handoff-demo
	github.com/agentproto/handoff/integrations/js/servers => ./integrations/js/servers
	github.com/agentproto/handoff/ledger => ./ledger
	github.com/agentproto/handoff/replay/boltstore => ./replay/boltstore
	github.com/agentproto/handoff/replay/pgstore => ./replay/pgstore
	github.com/agentproto/handoff/replay/redisstore => ./replay/redisstore
	github.com/agentproto/handoff/replay/replicas => ./replay/replicas
)
