package authn

import (
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// CredentialID names the credential that authenticated ti, for the
// ledger's record of who asked or decided: "api_key:7" (the key's ledger
// ID) or "jwt:<subject>"; empty for none. It never holds the credential
// itself.
func CredentialID(ti *auth.TokenInfo) string {
	if ti == nil {
		return ""
	}
	method, _ := ti.Extra[ExtraMethod].(string)
	switch method {
	case MethodAPIKey:
		return fmt.Sprintf("%s:%v", method, ti.Extra[ExtraKeyID])
	case MethodJWT:
		sub, _ := ti.Extra[ExtraSubject].(string)
		return method + ":" + sub
	}
	return method
}
