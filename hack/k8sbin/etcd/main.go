// Command etcd is the upstream etcd server (go.etcd.io/etcd/server/v3), wrapped in
// a module of its own because etcd's module cannot be installed with go install.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
