// Command oidcop runs the test OpenID Provider of package oidcop for a
// test in another process (the web app's browser test, a pod of the
// Kubernetes suite): two users, alice@example.com and
// mallory@elsewhere.org (subjects sub-alice and sub-mallory, both
// verified), and one web client with the id, secret and redirect URL
// given (the secret from a flag or, in a pod, from the
// environment). It logs, in the text format the web tests read,
// `msg="oidcop listening" issuer=URL`, and serves until SIGTERM or SIGINT.
// POST /oidcop/sign-in-as?sub=SUB chooses who the next sign-in is.
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/penguin-agent/penguin/internal/testkit/oidcop"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen at")
	issuer := flag.String("issuer", "", "the issuer URL, as clients reach the provider (default: http:// and the address it listens at)")
	clientID := flag.String("client-id", "penguin", "the web client's id")
	secret := flag.String("client-secret", "", "the web client's secret (or set OIDCOP_CLIENT_SECRET)")
	redirect := flag.String("redirect-url", "", "the web client's redirect URL")
	first := flag.String("sign-in-as", "sub-alice", "the subject the first sign-in is")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if *secret == "" {
		*secret = os.Getenv("OIDCOP_CLIENT_SECRET")
	}
	if *secret == "" || *redirect == "" {
		log.Error("oidcop: --client-secret and --redirect-url are required")
		os.Exit(2)
	}
	p, stop, err := oidcop.Run(*listen, *issuer,
		oidcop.User{ID: "sub-alice", Username: "alice", Email: "alice@example.com", EmailVerified: true},
		oidcop.User{ID: "sub-mallory", Username: "mallory", Email: "mallory@elsewhere.org", EmailVerified: true},
	)
	if err != nil {
		log.Error("oidcop: " + err.Error())
		os.Exit(1)
	}
	defer stop()
	p.ClientWith(*clientID, *secret, *redirect)
	p.SignInAs(*first)
	log.Info("oidcop listening", "issuer", p.Issuer)
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer cancel()
	<-ctx.Done()
}
