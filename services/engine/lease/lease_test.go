package lease_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
	"github.com/penguin-agent/penguin/services/engine/lease"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// openStore opens a real SQLite session store holding one session.
func openStore(t *testing.T, id string) store.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "engine.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if err := st.CreateSession(ctx, &store.Session{ID: id, ApprovalMode: penguinv1.ApprovalMode_APPROVAL_MODE_DENY_ALL}); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestAcquireHoldAndRelease(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st := openStore(t, "s1")
	a := lease.New(st, lease.Options{Owner: "engine-a", Address: "10.0.0.1:7423", TTL: time.Minute})
	b := lease.New(st, lease.Options{Owner: "engine-b", Address: "10.0.0.2:7423", TTL: time.Minute})

	if _, _, held, err := a.Holder(ctx, "s1"); err != nil || held {
		t.Fatalf("Holder before any lease = %v, %v", held, err)
	}
	la, err := a.Acquire(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	// The same replica acquires again (a restarted engine takes its lease
	// back); another one is told who holds it.
	if _, err := a.Acquire(ctx, "s1"); err != nil {
		t.Fatalf("the holder could not renew by acquiring: %v", err)
	}
	_, err = b.Acquire(ctx, "s1")
	var held *lease.HeldError
	if !errors.As(err, &held) || held.Owner != "engine-a" || held.Address != "10.0.0.1:7423" {
		t.Fatalf("second replica's Acquire = %v, want a HeldError naming engine-a", err)
	}
	if !strings.Contains(err.Error(), "engine-a") {
		t.Fatalf("error %q does not name the holder", err)
	}
	if owner, addr, ok, err := b.Holder(ctx, "s1"); err != nil || !ok || owner != "engine-a" || addr != "10.0.0.1:7423" {
		t.Fatalf("Holder = %q %q %v %v", owner, addr, ok, err)
	}
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := la.Release(ctx); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	if _, err := b.Acquire(ctx, "s1"); err != nil {
		t.Fatalf("Acquire after the release: %v", err)
	}
}

// A handed-over lease stays on record as a cut-off run: stale to every
// replica at once, and taken by the first that acquires it; a released
// one is nobody's.
func TestHandoverLeavesTheRunToTheNextReplica(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st := openStore(t, "s1")
	a := lease.New(st, lease.Options{Owner: "engine-a", Address: "10.0.0.1:7423", TTL: time.Minute})
	b := lease.New(st, lease.Options{Owner: "engine-b", Address: "10.0.0.2:7423", TTL: time.Minute})
	la, err := a.Acquire(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	la.Keep(ctx, func(string) { t.Error("a handed-over lease was reported lost") })
	if ids, err := b.Stale(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("b.Stale while a runs = %v, %v; want none", ids, err)
	}
	if ids, err := a.Stale(ctx); err != nil || len(ids) != 1 {
		t.Fatalf("a.Stale = %v, %v; want its own lease (a restarted a finds it)", ids, err)
	}
	if err := la.Handover(ctx); err != nil {
		t.Fatal(err)
	}
	eventually.Within(t, 5*time.Second, "the handed-over lease to be stale to b", func() bool {
		ids, err := b.Stale(ctx)
		return err == nil && len(ids) == 1 && ids[0] == "s1"
	})
	lb, err := b.Acquire(ctx, "s1")
	if err != nil {
		t.Fatalf("b could not take the handed-over lease: %v", err)
	}
	if ids, err := a.Stale(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("a.Stale after b took over = %v, %v", ids, err)
	}
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if ids, err := b.Stale(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("b.Stale after the release = %v, %v; want none", ids, err)
	}
}

func TestAcquireUnknownSession(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	k := lease.New(openStore(t, "s1"), lease.Options{Owner: "engine-a"})
	if _, err := k.Acquire(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Acquire of an unknown session = %v, want ErrNotFound", err)
	}
}

func TestDefaults(t *testing.T) {
	st := openStore(t, "s1")
	k := lease.New(st, lease.Options{Address: "127.0.0.1:7423"})
	if k.TTL() != lease.DefaultTTL {
		t.Fatalf("TTL = %s, want %s", k.TTL(), lease.DefaultTTL)
	}
	if !strings.HasSuffix(k.Owner(), "/127.0.0.1:7423") {
		t.Fatalf("owner with an address = %q, want host/address", k.Owner())
	}
	x, y := lease.New(st, lease.Options{}), lease.New(st, lease.Options{})
	if !strings.HasPrefix(x.Owner(), "engine-") || x.Owner() == y.Owner() {
		t.Fatalf("owners without an address = %q and %q, want two distinct random names", x.Owner(), y.Owner())
	}
}

// clockStore is an in-memory lease store on the bubble's fake clock, so
// that renewals and expiry can be tested exactly with testing/synctest.
type clockStore struct {
	mu     sync.Mutex
	owner  string
	expiry time.Time
	renews int
	fail   bool
}

func (c *clockStore) AcquireLease(_ context.Context, _ string, owner, _ string, ttl time.Duration) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail {
		return false, errors.New("store unreachable")
	}
	if c.owner != "" && c.owner != owner && time.Now().Before(c.expiry) {
		return false, nil
	}
	if c.owner == owner {
		c.renews++
	}
	c.owner, c.expiry = owner, time.Now().Add(ttl)
	return true, nil
}

func (c *clockStore) ReleaseLease(_ context.Context, _ string, owner string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owner == owner {
		c.owner = ""
	}
	return nil
}

func (c *clockStore) LeaseHolder(context.Context, string) (string, string, time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owner == "" || !time.Now().Before(c.expiry) {
		return "", "", time.Time{}, store.ErrNotFound
	}
	return c.owner, "addr-of-" + c.owner, c.expiry, nil
}

func (c *clockStore) StaleLeases(context.Context, string) ([]string, error) {
	return nil, errors.New("not used with the fake clock")
}

func (c *clockStore) LeaseCutOff(context.Context, string, string) (bool, error) {
	return false, errors.New("not used with the fake clock")
}

// holdOnFakeClock has replica a hold the lease of session s, with a TTL of
// 30 s, on a clockStore; b is another replica of the same store.
func holdOnFakeClock(t *testing.T) (*clockStore, *lease.Keeper, *lease.Lease) {
	t.Helper()
	st := &clockStore{}
	a := lease.New(st, lease.Options{Owner: "a", TTL: 30 * time.Second})
	b := lease.New(st, lease.Options{Owner: "b", TTL: 30 * time.Second})
	l, err := a.Acquire(t.Context(), "s")
	if err != nil {
		t.Fatal(err)
	}
	return st, b, l
}

// A kept lease is renewed every TTL/3, so it never expires while its task
// runs, and no other replica gets it.
func TestKeepRenewsBeforeExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, b, l := holdOnFakeClock(t)
		l.Keep(t.Context(), func(string) { t.Error("a kept lease was lost") })
		time.Sleep(5 * time.Minute) // fake time: ten lease lifetimes
		if _, err := b.Acquire(t.Context(), "s"); err == nil {
			t.Fatal("another replica took a lease that was being renewed")
		}
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		st.mu.Lock()
		renews := st.renews
		st.mu.Unlock()
		if renews != 30 {
			t.Fatalf("%d renewals in five minutes, want one every 10s (30)", renews)
		}
		if _, err := b.Acquire(t.Context(), "s"); err != nil {
			t.Fatalf("Acquire after Release: %v", err)
		}
	})
}

// A replica cut off from the store for longer than the TTL loses its lease
// to another one; its next renewal finds out and says who holds it now.
func TestKeepReportsALostLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, b, l := holdOnFakeClock(t)
		lostTo := make(chan string, 1)
		l.Keep(t.Context(), func(owner string) { lostTo <- owner })

		st.mu.Lock()
		st.fail = true // a's renewals fail: the store is cut off
		st.mu.Unlock()
		time.Sleep(31 * time.Second)
		synctest.Wait()
		st.mu.Lock()
		st.fail = false
		st.mu.Unlock()
		if _, err := b.Acquire(t.Context(), "s"); err != nil {
			t.Fatalf("b could not take the expired lease: %v", err)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		select {
		case owner := <-lostTo:
			if owner != "b" {
				t.Fatalf("lost to %q, want b", owner)
			}
		default:
			t.Fatal("the renewal after the takeover did not report the lost lease")
		}
		// Release after a loss gives nothing of b's away.
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		if owner, _, ok, _ := b.Holder(t.Context(), "s"); !ok || owner != "b" {
			t.Fatalf("holder after a's release = %q, %v; want b", owner, ok)
		}
	})
}
