package cli

import "testing"

func TestPositional(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"settlement-regression-842", "settlement-regression-842"},
		{"-t8vM70r1YKG7-X8A_MmnqesXjxPq63oBzG2dt5F3q4", "-- -t8vM70r1YKG7-X8A_MmnqesXjxPq63oBzG2dt5F3q4"},
		{"--tenant", "-- --tenant"},
		{"it's; rm -rf ~", `'it'\''s; rm -rf ~'`},
		{"-$(id)", `-- '-$(id)'`},
		{"", "''"},
	} {
		if got := positional(tc.in); got != tc.want {
			t.Errorf("positional(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
