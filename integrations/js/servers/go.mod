module github.com/agentproto/handoff/integrations/js/servers

go 1.26.0

replace (
	github.com/agentproto/handoff => ../../../
	github.com/agentproto/handoff/integrations => ../../
	github.com/agentproto/handoff/integrations/a2a1hop => ../../a2a1hop
)

require (
	github.com/a2aproject/a2a-go/v2 v2.4.0
	github.com/agentproto/handoff v0.1.0
	github.com/agentproto/handoff/integrations v0.1.0
	github.com/agentproto/handoff/integrations/a2a1hop v0.1.0
	github.com/go-jose/go-jose/v4 v4.1.9
	github.com/google/jsonschema-go v0.4.3
	github.com/modelcontextprotocol/go-sdk v1.8.0
	github.com/yosida95/uritemplate/v3 v3.0.2
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/fxamacker/cbor/v2 v2.10.0 // indirect
	github.com/go-json-experiment/json v1.27.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/gowebpki/jcs v1.0.2 // indirect
	github.com/segmentio/asm v1.1.3 // indirect
	github.com/segmentio/encoding v0.5.4 // indirect
	github.com/veraison/go-cose v1.3.0 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	go.opentelemetry.io/otel v1.45.0 // indirect
	go.opentelemetry.io/otel/metric v1.45.0 // indirect
	go.opentelemetry.io/otel/trace v1.45.0 // indirect
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/oauth2 v0.36.0 // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/text v0.44.0 // indirect
	golang.org/x/time v0.15.0 // indirect
)
