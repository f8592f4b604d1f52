package auth_test

import (
	"errors"
	"testing"

	"github.com/lakedata/lake/internal/auth"
)

func TestCheckListen(t *testing.T) {
	cases := []struct {
		addr     string
		loopback bool
	}{
		{"127.0.0.1:50051", true},
		{"127.0.0.1:0", true},
		{"127.255.1.2:1", true},
		{"[::1]:50051", true},
		{"[::ffff:127.0.0.1]:1", true},
		{"localhost:50051", true},
		{"LocalHost:50051", true},
		{":50051", false},
		{"0.0.0.0:50051", false},
		{"[::]:50051", false},
		{"10.0.0.5:50051", false},
		{"192.168.1.1:1", false},
		{"[2001:db8::1]:1", false},
		{"[::ffff:10.0.0.1]:1", false},
		{"example.com:50051", false},
		{"localhost.example.com:1", false},
		{"127.0.0.1.nip.io:1", false},
	}
	for _, tc := range cases {
		for _, haveTokens := range []bool{false, true} {
			for _, insecure := range []bool{false, true} {
				err := auth.CheckListen(tc.addr, haveTokens, insecure)
				wantRefusal := !tc.loopback && !haveTokens && !insecure
				if wantRefusal != (err != nil) {
					t.Errorf("CheckListen(%q, tokens=%v, insecure=%v) = %v, want refusal %v", tc.addr, haveTokens, insecure, err, wantRefusal)
				}
				if wantRefusal && !errors.Is(err, auth.ErrOpenListen) {
					t.Errorf("CheckListen(%q) = %v, want ErrOpenListen", tc.addr, err)
				}
			}
		}
	}
}

func TestCheckListenMessageNamesTheFlags(t *testing.T) {
	err := auth.CheckListen("0.0.0.0:50051", false, false)
	for _, want := range []string{"--token-file", "--insecure-no-auth", "0.0.0.0:50051"} {
		if err == nil || !contains(err.Error(), want) {
			t.Errorf("error %v does not mention %s", err, want)
		}
	}
}

func TestCheckListenMalformed(t *testing.T) {
	for _, addr := range []string{"", "127.0.0.1", "::1:50051", "[::1"} {
		if err := auth.CheckListen(addr, true, true); err == nil || errors.Is(err, auth.ErrOpenListen) {
			t.Errorf("CheckListen(%q) = %v, want an address error", addr, err)
		}
	}
}
