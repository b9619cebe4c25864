# corral for CI jobs, built with no registry (hack/corral-image.sh):
#   - the base is made on the machine by hack/base-image.sh (debootstrap
#     minbase of Debian 12 from the machine's apt mirror);
#   - corral and corral-init are built on the host by `make build` (Debian 12
#     has no Go 1.26 to build them in a stage; corral links libseccomp2
#     dynamically, the base's bookworm libseccomp2 matches the host's).
# Context: the repository root. Runs either with its own containerd (a job
# container with nearly all privileges; see hack/corral-image.sh run) or
# with a containerd socket mounted in.
ARG BASE=localhost/debian:bookworm-minbase
FROM ${BASE}
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends \
      containerd runc crun runsc libseccomp2 \
      busybox-static git ripgrep file ca-certificates \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
COPY build/corral /usr/local/bin/corral
COPY build/corral-init /usr/local/libexec/corral/corral-init
COPY hack/containerd-private.toml hack/runsc-wrapper.sh hack/with-containerd.sh /usr/share/corral/hack/
ENV CONTAINERD_ADDRESS=/run/corral-containerd/containerd.sock
ENTRYPOINT ["/usr/local/bin/corral"]
CMD ["--help"]
