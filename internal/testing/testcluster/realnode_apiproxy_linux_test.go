package testcluster

import (
	"io"
	"net"
	"testing"
)

func TestGatewayIP(t *testing.T) {
	for _, tc := range []struct {
		subnet, want string
		err          bool
	}{
		{subnet: "10.201.0.0/24", want: "10.201.0.1"},
		{subnet: "192.168.7.0/28", want: "192.168.7.1"},
		{subnet: "fd00::/64", err: true},
		{subnet: "10.201.0.0", err: true},
	} {
		got, err := gatewayIP(tc.subnet)
		if (err != nil) != tc.err {
			t.Errorf("gatewayIP(%q): error %v, want error %v", tc.subnet, err, tc.err)
			continue
		}
		if err == nil && got.String() != tc.want {
			t.Errorf("gatewayIP(%q) = %s, want %s", tc.subnet, got, tc.want)
		}
	}
}

// The proxy copies bytes both ways and passes a half-close on; close breaks
// the connections it holds.
func TestAPIProxy(t *testing.T) {
	echo, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() {
				_, _ = io.Copy(c, c)
				_ = c.Close()
			}()
		}
	}()
	p, err := startAPIProxy("127.0.0.1", echo.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	host, port := p.addr()
	if host != "127.0.0.1" || port == "0" {
		t.Fatalf("addr() = %s, %s", host, port)
	}
	conn, err := net.Dial("tcp", net.JoinHostPort(host, port))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(conn)
	if err != nil || string(got) != "hello" {
		t.Fatalf("read %q, %v; want %q", got, err, "hello")
	}

	held, err := net.Dial("tcp", net.JoinHostPort(host, port))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if _, err := held.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(held, make([]byte, 1)); err != nil {
		t.Fatalf("no echo through the proxy: %v", err)
	}
	if err := p.close(); err != nil {
		t.Fatal(err)
	}
	if n, err := held.Read(make([]byte, 1)); err == nil {
		t.Fatalf("read %d bytes after close, want the connection closed", n)
	}
	if c, err := net.Dial("tcp", net.JoinHostPort(host, port)); err == nil {
		_ = c.Close()
		t.Fatal("the proxy still accepts after close")
	}
}
