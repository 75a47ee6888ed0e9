import asyncio, sys, numpy as np, asynciocomm
from distributed.comm import connect, listen
from distributed.protocol import to_serialize
from distributed.protocol.utils_test import get_host_array
if sys.argv[1] == "takeover": asynciocomm.install()
async def main():
    for n_np, n_other, expect in [(1,0,False),(1,1800,False),(1,2100,True),(200_000,9500,False),(200_000,10500,True),(350_000,0,False)]:
        async def handle(comm):
            comm.max_shard_size = 250_000
            msg = await comm.read()
            msg["np"] = to_serialize(np.random.randint(0,256,n_np,dtype="u1"))
            msg["other"] = np.random.bytes(n_other)
            await comm.write(msg); await comm.close()
        lis = await listen("tcp://127.0.0.1:0", handle); await lis.start()
        comm = await connect(lis.contact_address)
        await comm.write({"op":"ping"}); msg = await comm.read(); await comm.close()
        a = msg["np"]; ha = get_host_array(a)
        size = ha.nbytes if hasattr(ha, "nbytes") else len(ha)
        print(n_np, n_other, "expect separate", expect, "host", type(ha).__name__, size, "separate", size == a.nbytes, "OK" if (size == a.nbytes) == expect else "MISMATCH")
        lis.stop()
asyncio.run(main())
