module github.com/agentproto/handoff/evidence/authority/boltauthority

go 1.26.0

require (
	github.com/agentproto/handoff v0.1.0
	github.com/stretchr/testify v1.12.1
	go.etcd.io/bbolt v1.5.0
)

require (
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

replace github.com/agentproto/handoff => ../../..
