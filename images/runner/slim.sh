#!/bin/sh
# hookcage-slim: make a Debian root filesystem small and keep it small.
#
# Run as root INSIDE the root filesystem it cleans (a Dockerfile RUN step, or
# `chroot ROOTFS /bin/sh -s < slim.sh` on a debootstrap tree): every path below
# is absolute on purpose, so never run it on a host you care about.
#
# 1. tells dpkg to skip docs, man pages, info pages and translations from now
#    on (so later `apt-get install`s in derived images stay small too);
# 2. deletes what is already there, the apt lists and caches, and the logs.
# Copyright files stay (licences travel with the binaries).
set -eu

mkdir -p /etc/dpkg/dpkg.cfg.d
cat > /etc/dpkg/dpkg.cfg.d/hookcage-nodoc <<'CFG'
# hookcage runner: keep the image small (see /usr/local/sbin/hookcage-slim)
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-exclude /usr/lib/*/perl/5.*/CORE/*.h
CFG

# Docs: keep only the copyright files.
if [ -d /usr/share/doc ]; then
    find /usr/share/doc -mindepth 1 ! -type d ! -name copyright -delete
    find /usr/share/doc -mindepth 1 -type d -empty -delete
fi
rm -rf /usr/share/man/* /usr/share/groff/* /usr/share/info/* \
       /usr/share/lintian/* /usr/share/linda/* /usr/share/locale/*
# Perl's C headers are only for compiling XS modules (git pulls perl in).
find /usr/lib -path '*/perl/5.*/CORE/*.h' -type f -delete

# apt: no package lists, no downloaded .debs, no binary caches.
rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb \
       /var/cache/apt/archives/partial/* /var/cache/apt/*.bin \
       /var/cache/debconf/*-old /var/lib/dpkg/*-old
mkdir -p /var/lib/apt/lists/partial /var/cache/apt/archives/partial

# Logs and leftovers of the build.
find /var/log -type f -delete
rm -rf /tmp/* /var/tmp/* /root/.cache
