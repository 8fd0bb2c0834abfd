# taskgate: `make test` runs every test; PostgreSQL tests run when
# TASKGATE_TEST_POSTGRES_URL is set (.ci/run always sets it). The race
# detector needs cgo, so `make test` needs a C compiler; the product itself
# builds with CGO_ENABLED=0. The archive's tests at scale (10,000
# operations) run without the race detector, which would take minutes.
GO ?= go

.PHONY: test vet build release image conformance interop bench-accept bench-proxy bench-replicas bench-fairness fuzz

test: vet
	CGO_ENABLED=1 $(GO) test -race -timeout 20m ./...
	CGO_ENABLED=0 $(GO) test -count=1 -timeout 20m -run 'Scale' ./archive/

vet:
	CGO_ENABLED=0 $(GO) build ./...
	$(GO) vet ./...

build:
	CGO_ENABLED=0 $(GO) build -o taskgate ./cmd/taskgate

# Archives for linux and darwin on amd64 and arm64, the Debian packages, a
# CycloneDX SBOM and SHA256SUMS into dist/; nfpm and cyclonedx-gomod are
# installed pinned into .cache/tools. Check with: (cd dist && sha256sum -c SHA256SUMS)
release:
	$(GO) run ./deploy/release -out dist -nfpm "$$(deploy/tool nfpm)" -cyclonedx "$$(deploy/tool cyclonedx-gomod)"

# The container image for linux/amd64 and linux/arm64: an OCI layout and
# docker load tarballs in dist/image. See docs/install.md.
image:
	$(GO) run ./deploy/image -out dist/image

# The official MCP conformance suite, directly and through taskgate, judged
# against conformance/baseline.yml; installs a pinned Node and the suite into
# .cache/conformance (needs npm). See docs/conformance.md.
conformance:
	./conformance/run

# Claude Code and the MCP TypeScript SDK's client, pinned (installed with
# npm into .cache/interop), against a real taskgate serve and the simulated
# provider, Claude Code with a scripted model on loopback; installs tmux if
# missing. See docs/claude-code.md.
interop:
	./interop/run

bench-accept:
	./bench/accept

bench-proxy:
	./bench/proxy

# Needs a PostgreSQL server: -postgres URL (default
# postgres://postgres@127.0.0.1:5432/test); pass flags with ARGS="...".
bench-replicas:
	./bench/replicas $(ARGS)

# One tenant's consequential-call p50 quiet and during another's flood;
# pass flags with ARGS="...".
bench-fairness:
	./bench/fairness $(ARGS)

fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzCanonicalize -fuzztime=60s ./canon/
	$(GO) test -run='^$$' -fuzz=FuzzFingerprintReorder -fuzztime=60s ./canon/
