package grpcclient_test

import (
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/penguin-agent/penguin/internal/grpcclient"
)

func TestPoolKeepsOneConnectionPerTarget(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	dialed := map[string]int{}
	pool := grpcclient.NewPool(func(target string) (grpcclient.Conn, error) {
		mu.Lock()
		dialed[target]++
		mu.Unlock()
		return grpcclient.New(target, grpcclient.Options{})
	})
	// Many callers at once get one connection per target.
	var wg sync.WaitGroup
	conns := make([]grpcclient.Conn, 16)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := pool.Get([]string{"127.0.0.1:1", "127.0.0.1:2"}[i%2])
			if err != nil {
				t.Error(err)
			}
			conns[i] = c
		}()
	}
	wg.Wait()
	for i, c := range conns {
		if c != conns[i%2] {
			t.Fatalf("caller %d got another connection than caller %d", i, i%2)
		}
	}
	if conns[0] == conns[1] {
		t.Fatal("two targets share a connection")
	}
	if dialed["127.0.0.1:1"] != 1 || dialed["127.0.0.1:2"] != 1 {
		t.Fatalf("dialed %v, want each target once", dialed)
	}

	if err := pool.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range conns[:2] {
		c := c.(*grpc.ClientConn)
		if s := c.GetState(); s != connectivity.Shutdown {
			t.Errorf("connection to %s is %v after Close, want Shutdown", c.Target(), s)
		}
	}
	if _, err := pool.Get("127.0.0.1:1"); err == nil {
		t.Fatal("Get after Close succeeded")
	}
}
