#!/usr/bin/env bash
# Boots a Debian kernel in QEMU (TCG: no KVM needed) with cgroup v2 as the only hierarchy,
# and runs a script of this machine's inside it.
#
#   scripts/vm.sh KERNEL_TREE BUSYBOX OUT [KERNEL_ARGS...]
#
# KERNEL_TREE is a tree scripts/vm-kernels.sh unpacked, BUSYBOX its static busybox. OUT is
# a directory of this machine's holding run.sh: the guest runs `sh /run/vm-out/run.sh`
# in a chroot of this machine's root (shared read-only over 9p, /tmp included, so a
# checkout there is seen) with the guest's own /proc, /sys, cgroup2 at /sys/fs/cgroup,
# /dev, and a tmpfs /run; TMPDIR is /run/tmp, writable. OUT is /run/vm-out there,
# writable, so the script leaves its results in it. The guest's console
# goes to OUT/console.log and the script's output to OUT/guest.log; OUT/exit holds the
# script's exit status. KERNEL_ARGS are added to the kernel's command line (`psi=0`).
# Memory and CPUs: MEMBLOAT_VM_MEMORY (MiB, default 4096), MEMBLOAT_VM_CPUS (default 2).
# The VM powers off when the script ends; MEMBLOAT_VM_TIMEOUT (s, default 600) ends it.
set -euo pipefail
tree=${1:?usage: vm.sh KERNEL_TREE BUSYBOX OUT [KERNEL_ARGS...]}
busybox=${2:?busybox}
out=${3:?out}
shift 3
tree=$(cd "$tree" && pwd)
out=$(cd "$out" && pwd)
[ -f "$out/run.sh" ] || { echo "vm.sh: no $out/run.sh" >&2; exit 2; }
release=$(cat "$tree/release")
kernel=$tree/boot/vmlinuz-$release
modules=$tree/lib/modules/$release
[ -d "$modules" ] || modules=$tree/usr/lib/modules/$release

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$root/bin" "$root/modules" "$root/proc" "$root/sys" "$root/dev" "$root/host"
cp "$busybox" "$root/bin/busybox"
# The modules 9p needs over virtio, and overlayfs (the overlay check), in load order; each
# kernel has a subset (6.12 builds virtio in, 5.10 has no netfs). Compressed ones are
# unpacked here: busybox's insmod cannot.
for m in virtio virtio_ring virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci \
         netfs fscache 9pnet 9pnet_virtio 9p overlay; do
  f=$(find "$modules/kernel" \( -name "$m.ko" -o -name "$m.ko.xz" \) -print -quit)
  [ -n "$f" ] || continue
  case $f in
    *.xz) xz -dc "$f" > "$root/modules/$m.ko" ;;
    *) cp "$f" "$root/modules/$m.ko" ;;
  esac
  echo "$m" >> "$root/modules/order"
done
cat > "$root/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
ip link set lo up || ifconfig lo 127.0.0.1 up
for m in $(cat /modules/order); do insmod /modules/$m.ko || echo "membloat-vm: insmod $m failed"; done
opts=trans=virtio,version=9p2000.L,msize=524288
mount -t 9p -o $opts,ro,cache=loose hostroot /host || { echo "membloat-vm: no 9p root"; poweroff -f; }
mount -t tmpfs run /host/run
mkdir -p /host/run/vm-out /host/run/tmp
chmod 1777 /host/run/tmp
mount -t 9p -o $opts out /host/run/vm-out
mount -t proc proc /host/proc
mount -t sysfs sys /host/sys
mount -t cgroup2 cgroup2 /host/sys/fs/cgroup
mount -t devtmpfs dev /host/dev
mkdir -p /host/dev/shm /host/dev/pts
mount -t tmpfs shm /host/dev/shm
echo "membloat-vm: running $(uname -r)"; cat /proc/mounts
chroot /host /usr/bin/env TMPDIR=/run/tmp /bin/sh -c 'cd /run/tmp && exec sh /run/vm-out/run.sh' > /host/run/vm-out/guest.log 2>&1
echo $? > /host/run/vm-out/exit
sync
echo "membloat-vm: done"
poweroff -f
EOF
chmod +x "$root/init"
# An initramfs is a newc cpio archive; python writes it (no cpio tool needed).
python3 - "$root" "$work/initrd" <<'EOF'
import os, sys
root, dest = sys.argv[1], sys.argv[2]
out = open(dest, 'wb')
ino = 1
def entry(name, mode, data=b'', nlink=1):
    global ino
    name_b = name.encode() + b'\0'
    hdr = '070701' + ''.join('%08x' % v for v in (
        ino, mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0, len(name_b), 0))
    ino += 1
    out.write(hdr.encode() + name_b)
    out.write(b'\0' * ((4 - (110 + len(name_b)) % 4) % 4))
    out.write(data)
    out.write(b'\0' * ((4 - len(data) % 4) % 4))
for dirpath, dirs, files in os.walk(root):
    dirs.sort()
    rel = os.path.relpath(dirpath, root)
    if rel != '.':
        entry(rel, 0o040755, nlink=2)
    for f in sorted(files):
        p = os.path.join(dirpath, f)
        name = os.path.normpath(os.path.join(rel, f))
        mode = 0o100755 if os.access(p, os.X_OK) else 0o100644
        entry(name, mode, open(p, 'rb').read())
entry('TRAILER!!!', 0)
out.close()
EOF

rm -f "$out/exit" "$out/console.log" "$out/guest.log"
timeout "${MEMBLOAT_VM_TIMEOUT:-600}" qemu-system-x86_64 \
  -accel tcg,thread=multi -cpu max -m "${MEMBLOAT_VM_MEMORY:-4096}" -smp "${MEMBLOAT_VM_CPUS:-2}" \
  -kernel "$kernel" -initrd "$work/initrd" \
  -append "console=ttyS0 panic=-1 quiet cgroup_no_v1=all transparent_hugepage=always $*" \
  -fsdev local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap \
  -device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot \
  -fsdev local,id=out,path="$out",security_model=none \
  -device virtio-9p-pci,fsdev=out,mount_tag=out \
  -nic none -display none -monitor none -serial file:"$out/console.log" -no-reboot \
  || { echo "vm.sh: qemu failed or timed out (console: $out/console.log)" >&2; exit 1; }
[ -f "$out/exit" ] || { echo "vm.sh: the guest did not finish (console: $out/console.log)" >&2; exit 1; }
exit "$(cat "$out/exit")"
