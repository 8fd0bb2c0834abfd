package provider

import (
	_ "embed"
	"encoding/json"
	"fmt"

	"github.com/taskgate/taskgate/config"
)

// ContractMetaKey is the key under which an upstream tool declares its
// provider contract in its _meta.
const ContractMetaKey = "dev.taskgate/contract"

// ContractVersion is the version of the declared contract this gateway
// reads; ContractSchema describes it.
const ContractVersion = config.DeclaredContractVersion

//go:embed contract.schema.json
var contractSchema string

// ContractSchema returns the JSON Schema (draft 2020-12) of a declared
// contract, for provider authors to check theirs against. DeclaredContract
// accepts no declaration the schema rejects; it also rejects a few the
// schema cannot (a provider status word mapped to two answers, an amount
// too large to hold).
func ContractSchema() []byte { return []byte(contractSchema) }

// DeclaredContract reads the provider contract a tool declares in its
// _meta (meta), without the configuration's defaults. ok is false when the
// tool declares none (no key, or null); err, a join of *config.FieldError
// naming each problem's field inside the declaration, when the declaration
// is not a contract this gateway can use.
func DeclaredContract(meta map[string]any) (c *config.Contract, ok bool, err error) {
	v := meta[ContractMetaKey]
	if v == nil {
		return nil, false, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, true, fmt.Errorf("_meta[%q] cannot be read as JSON: %w", ContractMetaKey, err)
	}
	c, err = config.DecodeContract(raw, fmt.Sprintf("_meta[%q]", ContractMetaKey), "")
	return c, true, err
}
