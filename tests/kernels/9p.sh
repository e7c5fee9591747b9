# WSL2 reaches Windows files through a 9p-based filesystem (/mnt/c): here a
# host directory shared over virtio-9p, mounted as 9p in the guest. Writes
# and reads made from inside the guest are recorded.
set -u
. /share/lib.sh
id provtest >/dev/null 2>&1 || useradd --create-home --shell /bin/bash provtest
dir=/share/p9-work
mkdir -p "$dir"; chown provtest: "$dir"
# By the mount table: statfs on 9p passes the server's answer through
# (a host ext4 directory says ext2/ext3 here).
fstype=$(findmnt -n -o FSTYPE -T "$dir")
[ "$fstype" = 9p ] || fail "$dir is not on 9p ($fstype)"
echo "statfs says: $(stat -f -c '%T' "$dir")"
home=/home/provtest
cd "$dir"
as provtest "$home" "$PROV" run -- sh -c 'echo via-9p >in9p.txt; cat in9p.txt >out9p.txt' || fail "prov run on 9p"
found=$(as provtest "$home" "$PROV" query wrote "$dir/out9p.txt" --json)
echo "$found"
echo "$found" | grep -q '"access":"read"[^}]*in9p.txt' || fail "the read of in9p.txt on 9p is not recorded"
echo "$found" | grep -q '"access":"write"[^}]*out9p.txt' || fail "the write of out9p.txt on 9p is not recorded"
echo "9p: ok"
