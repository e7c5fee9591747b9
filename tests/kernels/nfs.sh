# A user's home on NFS (kernel NFS server, mounted over loopback, NFSv4.2,
# root_squash as on clusters): the database lives there in rollback-journal
# mode, traced reads and writes of files there are recorded, and two "nodes"
# (processes with their own UTS namespace and hostname) record into the same
# NFS-hosted database at the same time without corruption or lost records.
set -u
. /share/lib.sh

# The server: short grace and lease times (set before nfsd starts), else
# opens and locks wait 90 s after boot.
modprobe nfsd
mount -t nfsd nfsd /proc/fs/nfsd
echo 10 >/proc/fs/nfsd/nfsv4leasetime; echo 10 >/proc/fs/nfsd/nfsv4gracetime
mkdir -p /run/rpcbind /var/lib/nfs/v4recovery /srv/nfs /home/nfs
rpcbind -w || fail "rpcbind did not start"
echo '/srv/nfs 127.0.0.1(rw,sync,no_subtree_check)' >/etc/exports
exportfs -ra || fail "exportfs"
rpc.mountd || fail "rpc.mountd did not start"
rpc.nfsd 4 || fail "rpc.nfsd did not start"
useradd --no-create-home --home-dir /home/nfs/nfsuser --shell /bin/bash nfsuser
mkdir -p /srv/nfs/nfsuser/work
chown -R nfsuser: /srv/nfs/nfsuser
# The server may not answer at once after rpc.nfsd returns: seen once under
# TCG, the first mount's calls went unanswered for the whole of its default
# timeouts (3 minutes) and it failed. So: wait for the server to answer,
# then mount with shorter timeouts, a few times.
for _ in $(seq 60); do
    rpcinfo -T tcp 127.0.0.1 nfs 4 >/dev/null 2>&1 && break
    sleep 1
done
mounted=
for _ in 1 2 3; do
    if mount -t nfs -o vers=4.2,timeo=100,retrans=2 127.0.0.1:/srv/nfs /home/nfs; then
        mounted=1
        break
    fi
    sleep 5
done
[ -n "$mounted" ] || fail "mount over loopback"
home=/home/nfs/nfsuser
findmnt -T "$home"
cd "$home/work"

# Traced writes and reads on NFS are recorded.
as nfsuser "$home" "$PROV" run -- sh -c 'echo on-nfs >input.txt; cat input.txt >output.txt' \
    || fail "prov run on NFS"
# prov run waits a bounded time for storing; on a slow NFS the record may
# follow in the background: ask again for up to a minute.
for _ in $(seq 60); do
    found=$(as nfsuser "$home" "$PROV" query wrote "$home/work/output.txt" --json)
    [ -z "$found" ] || break
    sleep 1
done
echo "$found"
echo "$found" | grep -q '"access":"read"[^}]*input.txt' || fail "the read of input.txt on NFS is not recorded"
echo "$found" | grep -q '"access":"write"[^}]*output.txt' || fail "the write of output.txt on NFS is not recorded"

# The database is on NFS and not in WAL mode.
db=$home/.local/share/prov/prov.db
# (As the user: root is squashed to nobody on the export, like on clusters.)
as nfsuser "$home" stat -f -c '%T' "$db" | grep -q nfs || fail "the database is not on NFS"
mode=$(as nfsuser "$home" sqlite3 "$db" 'pragma journal_mode')
[ "$mode" = delete ] || fail "journal_mode on NFS is $mode, not delete"
[ ! -e "$db-wal" ] || fail "a WAL file exists on NFS"

# Two nodes, one journal: each records N commands concurrently.
n=15
for node in node-a node-b; do
    unshare --uts sh -c "hostname $node; . /share/lib.sh; i=0; while [ \$i -lt $n ]; do
        as nfsuser $home $PROV run -- sh -c 'echo \$0 >$node-\$1.txt' $node \$i || echo 'FAIL prov run on $node'
        i=\$((i + 1)); done" &
done
wait
as nfsuser "$home" "$PROV" query history -n 1000 --json >/tmp/history.json || fail "prov query after the two nodes"
for node in node-a node-b; do
    got=$(grep -c "\"host\":\"$node\"" /tmp/history.json)
    echo "$node: $got records"
    [ "$got" = "$n" ] || fail "$node: $got of $n records in the NFS journal"
    complete=$(grep "\"host\":\"$node\"" /tmp/history.json | grep -c '"complete":true')
    [ "$complete" = "$n" ] || fail "$node: only $complete of $n records complete"
done
check=$(as nfsuser "$home" sqlite3 "$db" 'pragma integrity_check')
[ "$check" = ok ] || fail "integrity_check: $check"
echo "nfs: ok"
