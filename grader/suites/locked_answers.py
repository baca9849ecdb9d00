"""The quiz's and kvmemory's answers, locked (grader/suites/locked.py). Written by
`python -m grader.suites.hidden.lock_answers`: do not edit."""

from typing import Any

LOCKED: dict[str, dict[str, dict[str, Any]]] = {
    "kvmemory": {
        "Q_MC1": {"choices": "abcd", "hashes": ["620faf7a01a2b55213394efab1c21df1"], "kind": "letters"},
        "Q_MC2": {"choices": "abcd", "hashes": ["d94fc27a660dcf0002d4280269977704"], "kind": "letters"},
        "Q_NUM1": {
            "hashes": [
                "b78accf426fdccbb344ef7d5179fe90d",
                "c50e359399f8505c788e57ab318f8fd5",
                "cc0ac0c4dd75bd0808b0b0090524d061",
            ],
            "kind": "number",
            "rtol": 0.01,
        },
        "Q_NUM2": {
            "hashes": [
                "169553e7e2ff96fb5f5983d75c7c6f8c",
                "e1078a80ff1d79dd7e0b4234d91568d4",
                "fa38e0203411b9c05f29187175008657",
            ],
            "kind": "number",
            "rtol": 0.01,
        },
        "Q_NUM3": {
            "hashes": [
                "71676eeb1596c8989f3837c4775a9bac",
                "8f31632a90c9d81f537c622722946036",
                "ab72a79f774af85977a4121276ad08ac",
            ],
            "kind": "number",
            "rtol": 0.01,
        },
        "Q_TEXT1": {
            "hashes": [
                "0848a48e6b6843027d2babc7b7e948cf",
                "2765869e7fd82d326fa95d30b5c53e38",
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
            "hashes": [
                "a0936356f5d4665a53834cab1bd928b7",
                "c4980f73e88f729dc75978cb02b4e7c3",
                "e8b3a64218050b8c265f9156fb427b4d",
                "f641ac7a5734a7f3d714e1bd2842b3cf",
                "fd48362093f5282ae331f24de163bd48",
            ],
            "kind": "word",
        },
        "Q4": {
            "hashes": [
                "0d5ef7eb8afa4f622436d299797a9eed",
                "6e92dc24a464d0d1c53de1520b238051",
                "e9285508a7b2ced38839d7787658fe26",
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
