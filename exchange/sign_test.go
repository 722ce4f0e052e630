package exchange

import (
	"testing"
	"time"
)

// The vectors were computed independently from the spec (issue 2).
func TestSignVectors(t *testing.T) {
	t.Parallel()
	ts := time.UnixMilli(1763700000000)
	tests := []struct {
		name string
		in   SigningInput
		want string
	}{
		{
			name: "GET closed orders",
			in: SigningInput{Method: "GET", Host: "api.example.com", Path: "/v1/contracts/orders/closed",
				RawQuery: "range=202611&offsetId=0&limit=50", Key: "k-123", Timestamp: ts},
			want: "50f9a7e4e0255d1018ada2b2ca4790457e4db68346c06dd359b1c3448a3e9a5d",
		},
		{
			name: "POST settings",
			in: SigningInput{Method: "POST", Host: "api.example.com", Path: "/v1/contracts/positions/XBTC/settings",
				Body: []byte(`{"cross":false,"leverage":5}`), Key: "k-123", Timestamp: ts},
			want: "d48b6d75370fa9c8ce04ef78af88d9f857a8fb1865f72404baffa268960c3e01",
		},
		{
			name: "host port dropped",
			in: SigningInput{Method: "get", Host: "api.example.com:8443", Path: "/v1/contracts/orders/closed",
				RawQuery: "limit=50&offsetId=0&range=202611", Key: "k-123", Timestamp: ts},
			want: "50f9a7e4e0255d1018ada2b2ca4790457e4db68346c06dd359b1c3448a3e9a5d",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Sign("s3cret", tt.in); got != tt.want {
				t.Errorf("Sign = %s, want %s\ncanonical:\n%s", got, tt.want, CanonicalText(tt.in))
			}
			if !VerifySignature("s3cret", tt.in, tt.want) {
				t.Error("VerifySignature rejected the vector")
			}
			if VerifySignature("other", tt.in, tt.want) {
				t.Error("VerifySignature accepted a wrong secret")
			}
		})
	}
}

func TestCanonicalText(t *testing.T) {
	t.Parallel()
	in := SigningInput{Method: "GET", Host: "h", Path: "/v1/x", RawQuery: "b=2&a=%2Fx%20y", Key: "k", Timestamp: time.UnixMilli(5)}
	want := "GET\nh\n/v1/x\na=/x y&b=2\nAPI-KEY: k\nAPI-SIGNATURE-METHOD: HmacSHA256\nAPI-SIGNATURE-VERSION: 1\nAPI-TIMESTAMP: 5\n"
	if got := CanonicalText(in); got != want {
		t.Errorf("CanonicalText = %q, want %q", got, want)
	}
}

func FuzzCanonicalText(f *testing.F) {
	f.Add("GET", "api.example.com:443", "/v1/a", "range=202611&offsetId=0&limit=50", []byte(nil))
	f.Add("POST", "[::1]:80", "/v1/b", "", []byte(`{"cross":false,"leverage":5}`))
	f.Add("GET", "h", "/v1/c", "%zz=1&&=&a", []byte("x"))
	f.Fuzz(func(t *testing.T, method, host, path, query string, body []byte) {
		in := SigningInput{Method: method, Host: host, Path: path, RawQuery: query, Body: body, Key: "k", Timestamp: time.UnixMilli(1)}
		text := CanonicalText(in)
		if text != CanonicalText(in) {
			t.Fatal("canonical text not deterministic")
		}
		sig := Sign("s", in)
		if len(sig) != 64 || !VerifySignature("s", in, sig) {
			t.Fatalf("bad signature %q", sig)
		}
	})
}
