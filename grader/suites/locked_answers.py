"""The quiz's, kvmemory's and concepts' answers, locked (grader/suites/locked.py). Written by
`python -m grader.suites.hidden.lock_answers`: do not edit."""

from typing import Any

LOCKED: dict[str, dict[str, dict[str, Any]]] = {
    "concepts": {
        "Q_ABILITIES": {
            "choices": "abcd",
            "hashes": ["c7489393b056a517f13974af95a53742"],
            "kind": "letters",
            "per_student": True,
        },
        "Q_BLOCK": {
            "choices": "abcd",
            "hashes": ["b26dcfa780a1838097b6ba6b9d4771b6"],
            "kind": "letters",
            "per_student": True,
        },
        "Q_BUGLINE": {
            "hashes": [
                "0ceb1ffb6075d9498faf92d44ea33491",
                "352909f06e46651b8e6b47bc106ff51f",
                "cf5de7b8ad8d8e699c1cd6f206d9c80b",
            ],
            "kind": "number",
            "per_student": True,
            "rtol": 1e-06,
        },
        "Q_CROSS": {
            "hashes": [
                "39716b1a1afd9e0d371552375ae56ad7",
                "aebe33c7b16d19ee7ea2c965a02e337d",
                "bdf19ac2295875f4cd91b8f48d0f62ca",
            ],
            "kind": "number",
            "per_student": True,
            "rtol": 1e-06,
        },
        "Q_EXPOSURE": {
            "choices": "abcd",
            "hashes": ["51c8604d1321cefbe4f443b4db8d7462"],
            "kind": "letters",
            "per_student": True,
        },
        "Q_FAMILIES": {
            "choices": "abcd",
            "hashes": ["32e0c8cb48668de589aeb988ca8ce2af"],
            "kind": "letters",
            "per_student": True,
        },
        "Q_FEWSHOT": {
            "choices": "abcd",
            "hashes": ["51d9d4d603affc1aac31e59318576821"],
            "kind": "letters",
            "per_student": True,
        },
        "Q_LIE": {
            "choices": "abcd",
            "hashes": ["7f5fa3cb38a2abd62a5bb04fcb903f93"],
            "kind": "letters",
            "per_student": True,
        },
        "Q_LOSS0": {
            "hashes": [
                "30a276b1d59ecb24dca8aa245279f4b5",
                "3faccf382d775af00093a009d931230d",
                "782e01a0375c1c855ea066a6ca8e81dc",
                "e107a38b3a409fe195cb2f78bdf1bf05",
            ],
            "kind": "number",
            "per_student": True,
            "rtol": 0.057692307692307696,
        },
        "Q_MASKDIR": {
            "choices": "abcd",
            "hashes": ["3f899d980bee2ec09d8425bd545e9e83"],
            "kind": "letters",
            "per_student": True,
        },
        "Q_MASKED": {
            "hashes": [
                "0f77bfef16d93205beb5bcd04bd2c3d2",
                "aaf35592630a7debdc23945e0062dca8",
                "d6276a86950c79248af0d83118234f68",
            ],
            "kind": "number",
            "per_student": True,
            "rtol": 1e-06,
        },
        "Q_MISSING": {
            "choices": "abcd",
            "hashes": ["2b3fa94b5f8a6fbb1d19e92ea81154fd"],
            "kind": "letters",
            "per_student": True,
        },
        "Q_OMIT": {
            "choices": "abcd",
            "hashes": ["3d8816e8a3db01dc51ee9a2f08cc4257"],
            "kind": "letters",
            "per_student": True,
        },
        "Q_OVERFLOW": {
            "choices": "abcd",
            "hashes": ["14f7ff3778ddbecb73318e24b41c3a64"],
            "kind": "letters",
            "per_student": True,
        },
        "Q_PAD": {
            "hashes": [
                "12f945904de98434906e31bf7fa80c2d",
                "1e6eb050d85bcbb1abd33f6d6526113d",
                "9f1021d7053e9c65e9541bdfe68a3976",
            ],
            "kind": "number",
            "per_student": True,
            "rtol": 1e-06,
        },
        "Q_PARALLEL": {
            "choices": "abcd",
            "hashes": ["fb67e4918cb6494081ae9d775b19761f"],
            "kind": "letters",
            "per_student": True,
        },
        "Q_REVERSE": {
            "hashes": [
                "3bc7d04e37ddb5814ae61bc175cc8b48",
                "4d504b25c2c6dc03b114127790fcd2fb",
                "69f2874d415faf9a1dbd256b55d7760b",
            ],
            "kind": "number",
            "per_student": True,
            "rtol": 0.001,
        },
        "Q_SHAPE": {
            "choices": "abcd",
            "hashes": ["d8a4533f8fe00a26fe1ca8af9e85f7ed"],
            "kind": "letters",
            "per_student": True,
        },
        "Q_WINDOW": {
            "hashes": [
                "5971fbdaa1ba891b0fb1fad07150c0b5",
                "66008efe009964cd3156bc9bab0eebe3",
                "9c0c66afa21993915008c290d23399c4",
            ],
            "kind": "number",
            "per_student": True,
            "rtol": 1e-06,
        },
    },
    "kvmemory": {
        "Q_MC1": {
            "choices": "abcd",
            "hashes": ["620faf7a01a2b55213394efab1c21df1"],
            "kind": "letters",
            "per_student": True,
        },
        "Q_MC2": {
            "choices": "abcd",
            "hashes": ["d94fc27a660dcf0002d4280269977704"],
            "kind": "letters",
            "per_student": True,
        },
        "Q_NUM1": {
            "hashes": [
                "b78accf426fdccbb344ef7d5179fe90d",
                "c50e359399f8505c788e57ab318f8fd5",
                "cc0ac0c4dd75bd0808b0b0090524d061",
            ],
            "kind": "number",
            "per_student": True,
            "rtol": 0.01,
        },
        "Q_NUM2": {
            "hashes": [
                "169553e7e2ff96fb5f5983d75c7c6f8c",
                "e1078a80ff1d79dd7e0b4234d91568d4",
                "fa38e0203411b9c05f29187175008657",
            ],
            "kind": "number",
            "per_student": True,
            "rtol": 0.01,
        },
        "Q_NUM3": {
            "hashes": [
                "71676eeb1596c8989f3837c4775a9bac",
                "8f31632a90c9d81f537c622722946036",
                "ab72a79f774af85977a4121276ad08ac",
            ],
            "kind": "number",
            "per_student": True,
            "rtol": 0.01,
        },
        "Q_TEXT1": {
            "context": ["attention"],
            "hashes": [
                "2e26d8cd8bdfe3ab9e261a5e887ff168",
                "504fc2ca42e470068c2982efdda45385",
                "55343e71807fc8da2b31b65006cf1aab",
                "6dac800db299978167e49116efba467a",
                "c05c5bfa3544d5cd41402ac13b21ec13",
            ],
            "kind": "word",
        },
    },
    "quiz": {
        "Q1": {
            "hashes": [
                "787777ee387bf3120041a2a733f51897",
                "91c9d249b372179722ee00da78df6cf6",
                "acdc0d5d08e4324f156263de22b2ee98",
            ],
            "kind": "number",
            "rtol": 1e-06,
        },
        "Q2": {
            "hashes": [
                "5cb2055100d559246689e32013999bca",
                "69c90e3bd81a9512093b2d1603403814",
                "9c4d3f17b5c53df239781ace6688d779",
            ],
            "kind": "number",
            "rtol": 1e-06,
        },
        "Q3": {
            "context": [
                "diagonal",
                "main",
                "leading",
                "triangle",
                "triangular",
                "strictly",
                "part",
                "half",
                "side",
                "it",
                "in",
                "of",
                "matrix",
                "mask",
                "entries",
                "scores",
            ],
            "hashes": [
                "6b32d158717de2198a6081e053d09117",
                "c4980f73e88f729dc75978cb02b4e7c3",
                "e8b3a64218050b8c265f9156fb427b4d",
                "efb24223efb2663e14d0114240404a8c",
                "fd48362093f5282ae331f24de163bd48",
            ],
            "kind": "word",
        },
        "Q4": {
            "context": ["softmax", "soft max", "applying", "applied", "taking", "computing", "is", "it", "function"],
            "hashes": [
                "4df08ec1d924b5e41097211980d9b416",
                "4dfcf77ee93694005e95d7fc06bf6b85",
                "981ab7653eecfe64627d7da33c987f7d",
                "e9285508a7b2ced38839d7787658fe26",
                "f70e5f391e3fa1aadf1b109b149c2e8c",
            ],
            "kind": "word",
        },
        "Q5": {
            "hashes": [
                "26029975d4be27ca88f9e8ea5bf075d7",
                "678b6f68effebc1f9bd94babe2e96516",
                "7360c73354309cee73326c3cf907fc4a",
            ],
            "kind": "number",
            "rtol": 1e-06,
        },
        "Q6": {
            "hashes": [
                "20936eb88f5dc86cd90cc3f9a4fd1efa",
                "3cac23960fe6ed413fa5f6d690e3fd1c",
                "cac1c2978033116043f510fbb65a1834",
            ],
            "kind": "number",
            "rtol": 1e-06,
        },
        "Q7": {
            "hashes": [
                "72805c1158d244b447bcab0cdd76503b",
                "aca19e47ffd3baab16d91d569882bd32",
                "ee2be74eda3fb5ec7b8900624adab19f",
            ],
            "kind": "number",
            "rtol": 0.02,
        },
        "Q8": {
            "hashes": [
                "09582a3beccc66f2b4019948b1003fe9",
                "10fcab312e17c186ed0f05d87242a214",
                "3f5fe587cf802c5fbebddb60fd200ad4",
            ],
            "kind": "number",
            "rtol": 0.02,
        },
    },
}
