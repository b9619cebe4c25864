#!/usr/bin/env bash
# kubectl against the test cluster (hack/kube/cluster.sh): the apiserver
# listens only inside the cluster's network namespace.
exec "$(dirname "${BASH_SOURCE[0]}")/cluster.sh" kubectl "$@"
