# corral's image for CI jobs. Built with no registry by `make image-docker`
# (hack/corral-image.sh build):
#   - the base is made on the machine by hack/base-image.sh (debootstrap
#     minbase of Debian 12 from the machine's apt mirror) and named
#     localhost/debian:bookworm-minbase; with a registry, any Debian 12 image
#     does (`--build-arg BASE=debian:bookworm-slim`);
#   - corral, corral-init and corral-runsc are built on the host first (`make build`):
#     Debian 12 has no Go 1.26 to build them in a stage. corral links
#     Debian 12's libseccomp2 dynamically, which the base provides.
# Context: the repository root (.dockerignore lets in only what is copied).
#
# What the image supports (docs/ci.md):
#   - its own containerd, in a privileged job: the entry point
#     (with-containerd) starts one when none answers at $CONTAINERD_ADDRESS,
#     then runs the command (`docker run --privileged IMAGE corral run ...`);
#   - NOT a containerd socket of the host mounted in: corral makes its
#     session mounts inside the job's mount namespace, where the host's
#     containerd and runc cannot see them (docs/ci.md says why and what to
#     do instead).
ARG BASE=localhost/debian:bookworm-minbase
FROM ${BASE}
ENV DEBIAN_FRONTEND=noninteractive
# No documentation, man pages or translations in the packages below.
RUN printf '%s\n' 'path-exclude /usr/share/doc/*' 'path-include /usr/share/doc/*/copyright' \
      'path-exclude /usr/share/man/*' 'path-exclude /usr/share/info/*' 'path-exclude /usr/share/locale/*' \
      >/etc/dpkg/dpkg.cfg.d/corral-slim \
 && apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends \
      containerd runc crun runsc libseccomp2 \
      git ripgrep file \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/debconf/*-old /var/log/*
COPY hack/containerd-private.toml hack/with-containerd.sh /usr/share/corral/hack/
RUN ln -s /usr/share/corral/hack/with-containerd.sh /usr/local/bin/with-containerd
COPY build/corral-init build/corral-runsc /usr/local/libexec/corral/
COPY build/corral /usr/local/bin/corral
ENV CONTAINERD_ADDRESS=/run/corral-containerd/containerd.sock
ENTRYPOINT ["/usr/local/bin/with-containerd"]
CMD ["corral", "--help"]
