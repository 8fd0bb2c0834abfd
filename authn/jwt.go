package authn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"
)

// maxJWTLen bounds the tokens worth parsing; real access tokens are a few
// kilobytes at most.
const maxJWTLen = 16 << 10

// jwtVerifier checks OAuth 2.1 bearer JWTs: signature by a key from the
// issuer's JWKS with an allowed algorithm, iss, aud, exp (required), nbf and
// iat, and a tenant claim.
type jwtVerifier struct {
	opts   JWTOptions
	parser *jwt.Parser
	keys   *keySet
}

func newJWTVerifier(opts JWTOptions, keys *keySet, clock func() time.Time) *jwtVerifier {
	return &jwtVerifier{
		opts: opts,
		parser: jwt.NewParser(
			jwt.WithValidMethods(opts.Algorithms),
			jwt.WithIssuer(opts.Issuer),
			jwt.WithAudience(opts.Audience),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
			jwt.WithLeeway(opts.Leeway),
			jwt.WithTimeFunc(clock),
		),
		keys: keys,
	}
}

func (v *jwtVerifier) verify(ctx context.Context, token string) (*auth.TokenInfo, error) {
	if len(token) > maxJWTLen {
		return nil, fmt.Errorf("%w: the bearer token is longer than %d bytes", auth.ErrInvalidToken, maxJWTLen)
	}
	claims := jwt.MapClaims{}
	var kid string
	_, err := v.parser.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		// The parser has already refused algorithms outside opts.Algorithms,
		// so "none" and HMAC never get here.
		if raw, ok := t.Header["kid"]; ok {
			if kid, ok = raw.(string); !ok {
				return nil, errors.New("the kid header is not a string")
			}
		}
		return v.keys.lookup(ctx, kid, t.Method.Alg())
	})
	if errors.Is(err, errKeysUnavailable) {
		return nil, fmt.Errorf("verify JWT: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", auth.ErrInvalidToken, err)
	}

	raw, ok := claims[v.opts.TenantClaim]
	if !ok {
		return nil, fmt.Errorf("%w: the token has no %q claim naming the tenant", auth.ErrInvalidToken, v.opts.TenantClaim)
	}
	tenant, ok := raw.(string)
	if !ok {
		return nil, fmt.Errorf("%w: the token's %q claim is not a string", auth.ErrInvalidToken, v.opts.TenantClaim)
	}
	if err := checkTenant(tenant); err != nil {
		return nil, fmt.Errorf("%w: the token's %q claim: %w", auth.ErrInvalidToken, v.opts.TenantClaim, err)
	}
	// The parser required exp, so it is present and well-formed here.
	exp, err := claims.GetExpirationTime()
	if err != nil || exp == nil {
		return nil, fmt.Errorf("%w: the token's exp claim is unreadable", auth.ErrInvalidToken)
	}
	extra := map[string]any{
		ExtraTenant: tenant,
		ExtraMethod: MethodJWT,
		ExtraKeyID:  kid,
	}
	if sub, _ := claims.GetSubject(); sub != "" {
		extra[ExtraSubject] = sub
	}
	return &auth.TokenInfo{
		UserID:     tenant,
		Expiration: exp.Time,
		Scopes:     scopes(claims),
		Extra:      extra,
	}, nil
}

// scopes reads the granted scopes: the space-separated "scope" claim
// (RFC 9068 §2.2.3), or an "scp" array as some issuers write it.
func scopes(claims jwt.MapClaims) []string {
	if s, ok := claims["scope"].(string); ok {
		return strings.Fields(s)
	}
	list, ok := claims["scp"].([]any)
	if !ok {
		return nil
	}
	var out []string
	for _, v := range list {
		if s, ok := v.(string); ok && s != "" {
			out = append(out, s)
		}
	}
	return out
}
