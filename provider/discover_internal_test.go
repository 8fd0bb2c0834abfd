package provider

import "testing"

func TestJudgeDeclaration(t *testing.T) {
	a, b := []byte(`{"version":1}`), []byte(`{"cost":{"estimate":"2.00"},"version":1}`)
	tests := []struct {
		name            string
		adopted, listed []byte
		invalid         bool
		state           Declaration
		adopt           bool
	}{
		{"the first valid declaration is adopted", nil, a, false, DeclarationAdopted, true},
		{"none declared yet", nil, nil, false, DeclarationMissing, false},
		{"an invalid first declaration", nil, nil, true, DeclarationInvalid, false},
		{"the same again", a, a, false, DeclarationAdopted, false},
		{"another one", a, b, false, DeclarationChanged, false},
		{"none any more", a, nil, false, DeclarationChanged, false},
		{"an invalid one after a valid one", a, nil, true, DeclarationChanged, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state, adopt := judgeDeclaration(tt.adopted, tt.listed, tt.invalid)
			if state != tt.state || adopt != tt.adopt {
				t.Errorf("judgeDeclaration = %s, %v; want %s, %v", state, adopt, tt.state, tt.adopt)
			}
		})
	}
}
